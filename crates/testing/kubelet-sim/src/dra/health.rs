//! The kubelet's consumer of a driver's `NodeWatchResources` stream, in
//! `v1` or `v1alpha1`: it records every update per device, opens the
//! stream again [`super::DraSimOptions::health_retry`] after it ended or
//! could not be opened, and stops for good on `Unimplemented` or when the
//! registration goes.

use std::pin::Pin;
use std::sync::Arc;

use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;
use tonic::{Code, Status};
use wdp_kubelet_api::dra_health::{self, v1, v1alpha1};

use super::{DeviceHealth, DeviceHealthRecord, DraDriverRecord, HealthStream, Shared};

/// One device of one update, whatever the service version.
struct Reported {
    pool: String,
    device: String,
    health: i32,
    message: String,
    last_updated_time: i64,
    timeout_seconds: i64,
}

type Updates = Pin<Box<dyn Stream<Item = Result<Vec<Reported>, Status>> + Send>>;

/// Opens `NodeWatchResources` of `service` on `channel`.
async fn open(service: &str, channel: Channel) -> Result<Updates, Status> {
    if service == v1::SERVICE {
        let mut client = v1::dra_resource_health_client::DraResourceHealthClient::new(channel);
        let stream = client
            .node_watch_resources(v1::NodeWatchResourcesRequest {})
            .await?
            .into_inner();
        Ok(Box::pin(stream.map(|update| {
            update.map(|u| {
                u.devices
                    .into_iter()
                    .map(|d| {
                        let id = d.device.unwrap_or_default();
                        Reported {
                            pool: id.pool_name,
                            device: id.device_name,
                            health: d.health,
                            message: d.message,
                            last_updated_time: d.last_updated_time,
                            timeout_seconds: d.health_check_timeout_seconds,
                        }
                    })
                    .collect()
            })
        })))
    } else if service == v1alpha1::SERVICE {
        let mut client =
            v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel);
        let stream = client
            .node_watch_resources(v1alpha1::NodeWatchResourcesRequest {})
            .await?
            .into_inner();
        Ok(Box::pin(stream.map(|update| {
            update.map(|u| {
                u.devices
                    .into_iter()
                    .map(|d| {
                        let id = d.device.unwrap_or_default();
                        Reported {
                            pool: id.pool_name,
                            device: id.device_name,
                            health: d.health,
                            message: d.message,
                            last_updated_time: d.last_updated_time,
                            timeout_seconds: d.health_check_timeout_seconds,
                        }
                    })
                    .collect()
            })
        })))
    } else {
        Err(Status::unimplemented(format!(
            "the simulated kubelet cannot speak health service {service}"
        )))
    }
}

/// The generated enums of both versions share these values.
fn health_of(value: i32) -> Option<DeviceHealth> {
    match v1::HealthStatus::try_from(value).ok()? {
        v1::HealthStatus::Unknown => Some(DeviceHealth::Unknown),
        v1::HealthStatus::Healthy => Some(DeviceHealth::Healthy),
        v1::HealthStatus::Unhealthy => Some(DeviceHealth::Unhealthy),
    }
}

/// The kubelet's cut of an overlong message: 1,021 characters and `...`.
fn cut_message(message: String) -> String {
    if message.chars().count() <= dra_health::MAX_MESSAGE_CHARS {
        return message;
    }
    let mut cut: String = message
        .chars()
        .take(dra_health::MAX_MESSAGE_CHARS - 3)
        .collect();
    cut.push_str("...");
    cut
}

/// Consumes the health stream of `driver` until `stop` is cancelled or the
/// driver answers `Unimplemented`.
pub(crate) async fn watch_health(
    shared: Arc<Shared>,
    driver: String,
    registration: u64,
    service: String,
    channel: Channel,
    stop: CancellationToken,
) {
    let ours = Registration {
        shared: &shared,
        driver: &driver,
        registration,
    };
    loop {
        ours.update(|r| r.health_stream = HealthStream::Opening);
        let opened = tokio::select! {
            _ = stop.cancelled() => return,
            opened = open(&service, channel.clone()) => opened,
        };
        let ended = match opened {
            Err(status) => status,
            Ok(mut updates) => {
                ours.update(|r| {
                    r.health_stream = HealthStream::Open;
                    r.health_streams_opened += 1;
                });
                loop {
                    let next = tokio::select! {
                        _ = stop.cancelled() => return,
                        next = updates.next() => next,
                    };
                    match next {
                        Some(Ok(devices)) => ours.record(devices),
                        Some(Err(status)) => break status,
                        None => break Status::ok("the driver ended the stream"),
                    }
                }
            }
        };
        if ended.code() == Code::Unimplemented {
            tracing::info!(%driver, %service, "health stream unimplemented; not retried");
            ours.update(|r| r.health_stream = HealthStream::Unimplemented);
            return;
        }
        tracing::debug!(%driver, %service, status = %ended, "health stream ended; retrying");
        ours.update(|r| r.health_stream = HealthStream::Ended(ended.message().to_owned()));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(shared.options.health_retry) => {}
        }
    }
}

/// The record of one registration of a driver.
struct Registration<'a> {
    shared: &'a Shared,
    driver: &'a str,
    registration: u64,
}

impl Registration<'_> {
    /// Changes the record of this registration, never a newer one's.
    fn update(&self, change: impl FnOnce(&mut DraDriverRecord)) {
        let mut change = Some(change);
        self.shared.state.send_modify(|s| {
            if let Some(record) = s
                .drivers
                .get_mut(self.driver)
                .filter(|r| r.registration == self.registration)
                && let Some(change) = change.take()
            {
                change(record);
            }
        });
    }

    /// Records one update of the stream.
    fn record(&self, devices: Vec<Reported>) {
        let driver = self.driver;
        let mut violations = Vec::new();
        let mut entries = Vec::new();
        for d in devices {
            if d.message.chars().count() > dra_health::MAX_MESSAGE_CHARS {
                violations.push(format!(
                    "{driver}: health message of {}/{} is longer than {} characters",
                    d.pool,
                    d.device,
                    dra_health::MAX_MESSAGE_CHARS
                ));
            }
            let health = health_of(d.health).unwrap_or_else(|| {
                violations.push(format!(
                    "{driver}: device {}/{} has health value {}",
                    d.pool, d.device, d.health
                ));
                DeviceHealth::Unknown
            });
            entries.push((
                (d.pool, d.device),
                DeviceHealthRecord {
                    health,
                    message: cut_message(d.message),
                    last_updated_time: d.last_updated_time,
                    timeout_seconds: d.timeout_seconds,
                },
            ));
        }
        if !violations.is_empty() {
            self.shared
                .state
                .send_modify(|s| s.violations.append(&mut violations));
        }
        self.update(|r| {
            r.health.extend(entries);
            r.health_updates += 1;
        });
    }
}
