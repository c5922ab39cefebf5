//! What a starting host learns from the node before it serves a resource
//! that another kubelet API may have handed out, whatever the switch
//! record ([`crate::switch_record`]) says or lacks: the configuration may
//! have moved the resource between the APIs while the host was stopped, a
//! record may be damaged, the state folder may have lost it.
//!
//! - **A DRA resource** the kubelet knows as a device plugin's (its
//!   device-manager checkpoint names the resource, or cannot be read), or
//!   with a switch record (readable or not), starts as the device plugin →
//!   DRA handover: the device plugin registers again offering nothing and
//!   PodResources is read before any device is published.
//! - **A device-plugin resource** reads the checkpoint of every DRA driver
//!   in the state folder that no DRA resource serves now (and the driver a
//!   switch record names): the devices their prepared claims hold are
//!   withheld, each such driver serves `NodeUnprepareResources` until its
//!   claims are gone (a draining driver that never publishes), and its
//!   ResourceSlices on this node are deleted. A checkpoint that cannot be
//!   read withholds every device of the resource, at ERROR naming the
//!   file, with `holdings_unreadable{source="dra-checkpoint"}` at 1, and
//!   is read again with backoff until it can be (or is gone).

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use wdp_config::{ConfigSet, ServingApi, default_socket_name};
use wdp_dra_driver::{Draining, checkpointed_drivers, held_by_checkpoint};
use wdp_kubelet_socket::device_manager_checkpoint;
use wdp_resource::{Resource, Withholding};

use crate::api_switch;
use crate::error::HostError;
use crate::state::HostState;
use crate::supervisor::Host;
use crate::switch_record::SwitchRecord;

/// The longest wait between two reads of an unreadable DRA checkpoint.
const CHECKPOINT_RETRY_MAX: Duration = Duration::from_secs(10);

/// Why a device-plugin resource withholds devices at start.
const HELD_BY_UNSERVED_DRIVER: &str = "held by claims a DRA driver no longer served prepared (its API server client could not be made)";

impl Host {
    /// DRA drivers with a checkpoint in the state folder that no DRA
    /// resource of `config` serves (their files not read).
    fn unserved_drivers(&self, config: &ConfigSet) -> Vec<String> {
        let served: BTreeSet<&str> = config.dra_resources().map(|(driver, _)| driver).collect();
        checkpointed_drivers(&self.options.state_dir)
            .into_iter()
            .filter(|driver| !served.contains(driver.as_str()))
            .collect()
    }

    /// The [`unserved_drivers`](Self::unserved_drivers) of the
    /// configuration served whose checkpoint holds prepared claims (or
    /// cannot be read).
    pub(crate) async fn unserved_checkpoints(&self) -> Vec<String> {
        let unserved = self.unserved_drivers(&self.state.lock().await.config);
        unserved
            .into_iter()
            .filter(|driver| {
                held_by_checkpoint(&self.options.state_dir, driver)
                    .map_or(true, |held| !held.is_empty())
            })
            .collect()
    }

    /// Whether `resource` may resume a handover at start, so that it is
    /// not served before its first scan (the devices it must withhold are
    /// known only then); `unserved` as [`unserved_checkpoints`](Self::unserved_checkpoints).
    pub(crate) fn may_resume(&self, resource: &Resource, unserved: &[String]) -> bool {
        SwitchRecord::read(&self.options.state_dir, resource.name()).is_some()
            || (resource.spec().config.api == ServingApi::DevicePlugin && !unserved.is_empty())
    }

    /// Resumes (or starts) the handover `resource` needs before it is
    /// served, from what the node holds (see the module docs). The caller
    /// holds the state (see `crate::state`).
    pub(crate) async fn resume_handover(
        self: &Arc<Self>,
        state: &mut HostState,
        name: &str,
        resource: &Arc<Resource>,
    ) -> Result<(), HostError> {
        let read = SwitchRecord::read(&self.options.state_dir, resource.name());
        let recorded = read.is_some();
        let record = match read {
            None => None,
            Some(Ok(record)) => Some(record),
            Some(Err(error)) => {
                tracing::error!(resource = %resource.name(), %error, "the API switch record is unreadable: what the other kubelet API holds is read from the node instead");
                None
            }
        };
        match resource.spec().config.api {
            ServingApi::Dra => {
                self.resume_to_dra(state, name, resource, record, recorded)
                    .await
            }
            ServingApi::DevicePlugin => {
                self.resume_to_device_plugin(state, name, resource, record)
                    .await
            }
        }
    }

    /// A DRA resource: the device plugin → DRA handover when a record
    /// exists (`recorded`, readable as `record` or not) or the kubelet
    /// knows the resource as a device plugin's.
    async fn resume_to_dra(
        &self,
        state: &mut HostState,
        name: &str,
        resource: &Arc<Resource>,
        record: Option<SwitchRecord>,
        recorded: bool,
    ) -> Result<(), HostError> {
        let record = match record {
            Some(record) => record,
            None => {
                let known = match device_manager_checkpoint::device_plugin_resources(
                    &self.options.device_plugin_dir,
                ) {
                    Ok(names) => names.contains(resource.name()),
                    Err(error) => {
                        tracing::error!(resource = %resource.name(), %error, "cannot tell whether the kubelet knows the resource as a device plugin's: PodResources is read before any of its devices is published through DRA");
                        true
                    }
                };
                if !known && !recorded {
                    return Ok(());
                }
                if !recorded {
                    tracing::info!(resource = %resource.name(), "the kubelet knows the resource as a device plugin's (its device-manager checkpoint names it): PodResources is read before any of its devices is published through DRA");
                }
                SwitchRecord {
                    resource: resource.name().to_owned(),
                    driver: resource.spec().config.driver.clone().unwrap_or_default(),
                    socket: default_socket_name(resource.name()),
                }
            }
        };
        tracing::info!(resource = %resource.name(), socket = %record.socket, "resuming the switch from the device-plugin API to DRA");
        let served = self.retiring_resource(resource, &record).await?;
        let server = self.device_plugin_server(served.clone());
        let handover = api_switch::to_dra(
            &self.switch_paths(),
            &record,
            server,
            served,
            resource.clone(),
        )
        .await;
        state.handovers.insert(name.to_owned(), handover);
        Ok(())
    }

    /// A device-plugin resource: every DRA driver no longer served whose
    /// checkpoint holds its devices drains, and those devices are withheld
    /// until its claims are unprepared.
    async fn resume_to_device_plugin(
        self: &Arc<Self>,
        state: &mut HostState,
        name: &str,
        resource: &Arc<Resource>,
        record: Option<SwitchRecord>,
    ) -> Result<(), HostError> {
        let devices: BTreeSet<String> = resource
            .devices()
            .devices_advertised()
            .into_iter()
            .map(|device| device.id)
            .collect();
        let mut drivers: BTreeSet<String> = record.iter().map(|r| r.driver.clone()).collect();
        let mut held = BTreeSet::new();
        for driver in self.unserved_drivers(&state.config) {
            match held_by_checkpoint(&self.options.state_dir, &driver) {
                Ok(ids) => {
                    let mine: BTreeSet<String> = ids.intersection(&devices).cloned().collect();
                    if !mine.is_empty() {
                        drivers.insert(driver);
                        held.extend(mine);
                    }
                }
                Err(error) => {
                    tracing::error!(resource = %resource.name(), %driver, %error, "cannot tell which devices the claims this DRA driver prepared hold: every device of the resource is withheld until its checkpoint can be read (or is removed)");
                    self.metrics.host.set_holdings_unreadable(
                        resource.name(),
                        "dra-checkpoint",
                        true,
                    );
                    resource.set_withholding(Withholding::all(error.to_string()));
                    self.resume_when_readable(name, resource, driver);
                    return Ok(());
                }
            }
        }
        self.metrics
            .host
            .set_holdings_unreadable(resource.name(), "dra-checkpoint", false);
        resource.set_withholding(Withholding::none());
        if drivers.is_empty() {
            SwitchRecord::remove(&self.options.state_dir, resource.name());
            return Ok(());
        }
        let record = record.unwrap_or_else(|| SwitchRecord {
            resource: resource.name().to_owned(),
            driver: drivers.first().cloned().unwrap_or_default(),
            socket: resource.spec().config.socket.clone(),
        });
        tracing::info!(resource = %resource.name(), ?drivers, "resuming the switch from DRA to the device-plugin API: the devices prepared claims hold are withheld until they are unprepared");
        let api = match self.dra_api(state, resource).await {
            Ok(api) => api,
            Err(error) => {
                // Without an API client the drivers cannot be served to
                // unprepare their claims: their devices stay withheld.
                tracing::error!(resource = %resource.name(), ?drivers, %error, "cannot serve the unprepare of the claims DRA drivers prepared: the devices they hold stay withheld");
                resource.set_withholding(Withholding::some(held, HELD_BY_UNSERVED_DRIVER));
                return Ok(());
            }
        };
        let mut claims = Vec::new();
        for driver in &drivers {
            let started = Draining::start(
                resource.clone(),
                self.metrics.dra.clone(),
                driver,
                &self.driver_paths(),
                &api,
                &self.shutdown,
            )
            .await;
            if let Some(draining) = started {
                claims.push(draining.claims());
                state.draining.push(draining);
            }
        }
        if claims.is_empty() {
            SwitchRecord::remove(&self.options.state_dir, resource.name());
            return Ok(());
        }
        let handover =
            api_switch::to_device_plugin(&self.switch_paths(), &record, claims, resource.clone())
                .await;
        state.handovers.insert(name.to_owned(), handover);
        Ok(())
    }

    /// Reads `driver`'s checkpoint again with backoff until it can be read
    /// (or is gone), then resumes `resource`'s handover from it.
    fn resume_when_readable(
        self: &Arc<Self>,
        name: &str,
        resource: &Arc<Resource>,
        driver: String,
    ) {
        let host: Weak<Self> = Arc::downgrade(self);
        let (name, resource) = (name.to_owned(), resource.clone());
        let state_dir = self.options.state_dir.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            let mut retry = Duration::from_secs(1);
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(retry) => {}
                }
                if held_by_checkpoint(&state_dir, &driver).is_ok() {
                    break;
                }
                retry = (retry * 2).min(CHECKPOINT_RETRY_MAX);
            }
            let Some(host) = host.upgrade() else { return };
            tracing::info!(resource = %resource.name(), %driver, "the DRA checkpoint can be read now: the devices its claims do not hold are offered");
            let resumed: std::pin::Pin<Box<dyn Future<Output = Result<(), HostError>> + Send>> =
                Box::pin(async move {
                    let mut state = host.state.lock().await;
                    host.resume_handover(&mut state, &name, &resource).await
                });
            if let Err(error) = resumed.await {
                tracing::error!(%error, "cannot resume the switch from DRA");
            }
        });
    }
}
