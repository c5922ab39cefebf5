//! The kubelet's DRA plugin handler: validates what a registration socket's
//! `GetInfo` answers, picks the DRA and health services, records the
//! driver, starts its health stream and reports with
//! `NotifyRegistrationStatus`; a removed socket deregisters its driver.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::pluginregistration::{DRA_PLUGIN_TYPE, PluginInfo};

use super::{DraDriverRecord, HealthStream, Shared, health};
use crate::registry_watch::{
    Handled, HandlerFuture, OpenError, SocketHandler, notify_status, open_registration,
};

/// Numbers registrations, for [`DraDriverRecord`]'s `registration`.
static NEXT_REGISTRATION: AtomicU64 = AtomicU64::new(1);

/// The [`SocketHandler`] for `DRAPlugin` sockets.
pub(crate) struct DraHandler {
    shared: Arc<Shared>,
}

impl DraHandler {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl SocketHandler for DraHandler {
    fn register(&self, socket: PathBuf, stop: CancellationToken) -> HandlerFuture<'_> {
        Box::pin(async move { register(&self.shared, &socket, &stop).await })
    }

    fn deregister(&self, socket: &Path) {
        self.shared.state.send_modify(|s| {
            s.standby.retain(|record| {
                let gone = record.socket == socket;
                if gone {
                    tracing::info!(driver = %record.info.name, endpoint = %record.info.endpoint, "DRA driver instance deregistered; a newer one stays");
                    record.stop.cancel();
                }
                !gone
            });
            let gone: Vec<String> = s
                .drivers
                .iter()
                .filter(|(_, record)| record.socket == socket)
                .map(|(name, _)| name.clone())
                .collect();
            for name in gone {
                if let Some(record) = s.drivers.remove(&name) {
                    record.stop.cancel();
                }
                // The newest remaining instance is called from now on.
                match s.standby.iter().rposition(|r| r.info.name == name) {
                    Some(newest) => {
                        let record = s.standby.remove(newest);
                        tracing::info!(driver = %name, endpoint = %record.info.endpoint, "DRA driver instance deregistered; calling the remaining one");
                        s.drivers.insert(name, record);
                    }
                    None => tracing::info!(driver = %name, "DRA driver deregistered"),
                }
            }
        });
    }
}

/// The kubelet's choice of DRA service: the first entry of the plugin's
/// list that the kubelet supports (`validateSupportedServices`).
pub(crate) fn choose_service(offered: &[String], supported: &[String]) -> Result<String, String> {
    if offered.is_empty() {
        return Err("empty list of supported gRPC services (aka supported versions)".to_owned());
    }
    offered
        .iter()
        .find(|service| supported.contains(service))
        .cloned()
        .ok_or_else(|| {
            format!(
                "none of services supported by the plugin ({offered:?}) are supported by the kubelet ({supported:?})"
            )
        })
}

/// The kubelet's choice of health service: the newest it knows (its list
/// is newest first) that the plugin offers.
pub(crate) fn choose_health_service(offered: &[String], known: &[String]) -> Option<String> {
    known
        .iter()
        .find(|service| offered.contains(service))
        .cloned()
}

/// Why `info` cannot be a DRA driver, in the kubelet's words where it has
/// them; otherwise the DRA service to use.
fn validate(info: &PluginInfo, supported: &[String]) -> Result<String, String> {
    if info.r#type != DRA_PLUGIN_TYPE {
        return Err(format!(
            "no handler registered for plugin type: {}",
            info.r#type
        ));
    }
    if info.name.is_empty() {
        return Err("DRA driver name is empty".to_owned());
    }
    if !Path::new(&info.endpoint).is_absolute() {
        return Err(format!(
            "endpoint {:?} of DRA driver {} is not an absolute path",
            info.endpoint, info.name
        ));
    }
    choose_service(&info.supported_versions, supported).map_err(|problem| {
        format!(
            "invalid supported gRPC versions of DRA driver plugin {} at endpoint {}: {problem}",
            info.name, info.endpoint
        )
    })
}

/// One registration, the plugin watcher's `RegisterPlugin` operation with
/// the DRA handler behind it.
async fn register(shared: &Arc<Shared>, socket: &Path, stop: &CancellationToken) -> Handled {
    let fail = |reason: String| {
        tracing::warn!(socket = %socket.display(), %reason, "DRA registration failed");
        shared
            .state
            .send_modify(|s| s.failures.push((socket.to_owned(), reason)));
        Handled::Done
    };
    let (mut conn, info) = match open_registration(socket).await {
        Ok(opened) => opened,
        Err(OpenError::NotYet(e)) => {
            tracing::debug!(socket = %socket.display(), error = %e, "cannot dial yet");
            return Handled::NotYet;
        }
        Err(OpenError::GetInfo(e)) => return fail(format!("GetInfo: {e}")),
    };
    let chosen_service = match validate(&info, &shared.options.supported_services) {
        Ok(service) => service,
        Err(problem) => {
            // Recorded first, so whoever sees the refusal sees the record.
            fail(problem.clone());
            if let Err(e) = notify_status(&mut conn, false, problem).await {
                fail(format!("NotifyRegistrationStatus: {e}"));
            }
            return Handled::Done;
        }
    };
    if let Some(reason) = shared.refusal() {
        shared
            .state
            .send_modify(|s| s.refused.push((socket.to_owned(), reason.clone())));
        if let Err(e) = notify_status(&mut conn, false, reason).await {
            fail(format!("NotifyRegistrationStatus: {e}"));
        }
        return Handled::Done;
    }
    let taken = {
        let state = shared.state.borrow();
        state
            .drivers
            .values()
            .chain(&state.standby)
            .any(|r| r.info.name == info.name && r.info.endpoint == info.endpoint)
    };
    if taken {
        // One instance cannot hijack the endpoint of another.
        let problem = format!(
            "endpoint {} already registered for DRA driver plugin {}",
            info.endpoint, info.name
        );
        fail(problem.clone());
        if let Err(e) = notify_status(&mut conn, false, problem).await {
            fail(format!("NotifyRegistrationStatus: {e}"));
        }
        return Handled::Done;
    }
    let health_service =
        choose_health_service(&info.supported_versions, &shared.options.health_services);
    let channel = wdp_kubelet_api::connect_unix_target(&info.endpoint);
    let driver = info.name.clone();
    let registration_stop = stop.child_token();
    let registration = NEXT_REGISTRATION.fetch_add(1, Ordering::Relaxed);
    shared.state.send_modify(|s| {
        let count = s.registrations.entry(driver.clone()).or_default();
        *count += 1;
        let record = DraDriverRecord {
            socket: socket.to_owned(),
            info: info.clone(),
            chosen_service: chosen_service.clone(),
            health_service: health_service.clone(),
            registrations: *count,
            registered_at: Instant::now(),
            health: Default::default(),
            health_updates: 0,
            health_stream: if health_service.is_some() {
                HealthStream::Opening
            } else {
                HealthStream::NotOffered
            },
            health_streams_opened: 0,
            registration,
            channel: channel.clone(),
            stop: registration_stop.clone(),
        };
        // An older instance stays registered beside the new one.
        if let Some(older) = s.drivers.insert(driver.clone(), record) {
            s.standby.push(older);
        }
    });
    tracing::info!(%driver, service = %chosen_service, health = ?health_service, "DRA driver registered");
    if let Some(service) = health_service {
        tokio::spawn(health::watch_health(
            shared.clone(),
            driver,
            registration,
            service,
            channel,
            registration_stop,
        ));
    }
    if let Err(e) = notify_status(&mut conn, true, String::new()).await {
        fail(format!("NotifyRegistrationStatus: {e}"));
    }
    Handled::Done
}

#[cfg(test)]
#[path = "registration_tests.rs"]
mod tests;
