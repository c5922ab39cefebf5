//! The kubelet's DRA device-health stream (`DRAResourceHealth`, v1 and
//! v1alpha1): `NodeWatchResources` sends the driver's full device list
//! (pool, DRA device name, HEALTHY / UNHEALTHY, when, the timeout and the
//! health reason as the message) at once, again on every change of the
//! resource's device set, and again every half
//! `health_check_timeout_seconds` so the kubelet never lets a device fall
//! to Unknown. The stream ends when the device set's sender goes away (the
//! resource left the config) or the service is stopped.
//!
//! `last_updated_time` is when the device's health (or its reason) last
//! changed as this host saw it, not when the update was sent: the kubelet
//! stamps each update's arrival itself for its staleness check (`LastUpdated
//! = now` in its health cache), so resending an old time never makes a
//! device Unknown, and the pod status shows since when a device is
//! unhealthy. A device first seen counts as changed then.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::Stream;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::dra_health::{self, v1, v1alpha1};

use wdp_resource::{DeviceSet, SharedDeviceSet};

/// The timeout sent in every update unless [`HealthService::with_timeout`]
/// says otherwise: the kubelet's own default.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration =
    Duration::from_secs(dra_health::DEFAULT_HEALTH_CHECK_TIMEOUT_SECS.unsigned_abs());

/// One device's health, independent of the proto version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceHealthEntry {
    /// The pool (the node name).
    pub pool_name: String,
    /// The DRA device name.
    pub device_name: String,
    /// Whether the device may be used.
    pub healthy: bool,
    /// The health reason, at most [`dra_health::MAX_MESSAGE_CHARS`]
    /// characters (empty when healthy and no reason was given).
    pub message: String,
}

/// The health list of `set`, in device-name order. Devices whose ID has no
/// DRA name (refused by `check`; the publisher logs them) are left out.
pub fn health_entries(set: &DeviceSet, pool_name: &str) -> Vec<DeviceHealthEntry> {
    let mut entries: Vec<DeviceHealthEntry> = set
        .devices()
        .iter()
        .filter_map(|device| {
            let device_name = wdp_k8s_naming::device_name(device.id()).ok()?;
            Some(DeviceHealthEntry {
                pool_name: pool_name.to_owned(),
                device_name,
                healthy: device.healthy,
                message: truncate_chars(&device.reason, dra_health::MAX_MESSAGE_CHARS),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.device_name.cmp(&b.device_name));
    entries
}

fn truncate_chars(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Serves `NodeWatchResources` for one driver from its resource's device
/// set; clone it into both the v1 and the v1alpha1 tonic servers
/// ([`HealthService::v1_server`], [`HealthService::v1alpha1_server`]).
#[derive(Clone, Debug)]
pub struct HealthService {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    devices: watch::Receiver<SharedDeviceSet>,
    driver: String,
    pool_name: String,
    timeout: Duration,
    stop: CancellationToken,
    since: Arc<HealthSince>,
}

/// When each device's health last changed (Unix seconds), shared by every
/// stream of the service so a reopened stream keeps the times.
#[derive(Debug, Default)]
struct HealthSince(std::sync::Mutex<HashMap<String, (bool, String, i64)>>);

impl HealthSince {
    /// The change time of each entry as of `now`, in entry order; devices
    /// no longer listed are forgotten.
    fn stamp(&self, entries: &[DeviceHealthEntry], now: i64) -> Vec<i64> {
        let mut known = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = HashMap::with_capacity(entries.len());
        let times = entries
            .iter()
            .map(|entry| {
                let state = (entry.healthy, entry.message.clone());
                let since = match known.remove(&entry.device_name) {
                    Some((healthy, message, since)) if healthy == state.0 && message == state.1 => {
                        since
                    }
                    _ => now,
                };
                next.insert(entry.device_name.clone(), (state.0, state.1, since));
                since
            })
            .collect();
        *known = next;
        times
    }
}

impl HealthService {
    /// The service of `driver`, reading `devices` (the resource's device
    /// set, see `Resource::subscribe`) and naming `pool_name` (the node
    /// name) in every update, with `DEFAULT_HEALTH_CHECK_TIMEOUT`.
    pub fn new(
        devices: watch::Receiver<SharedDeviceSet>,
        driver: impl Into<String>,
        pool_name: impl Into<String>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                devices,
                driver: driver.into(),
                pool_name: pool_name.into(),
                timeout: DEFAULT_HEALTH_CHECK_TIMEOUT,
                stop: CancellationToken::new(),
                since: Arc::default(),
            }),
        }
    }

    /// The same service announcing `timeout` as
    /// `health_check_timeout_seconds` (whole seconds, at least 1) and
    /// re-sending the full list every half of it.
    #[must_use]
    pub fn with_timeout(self, timeout: Duration) -> Self {
        self.rebuild(|inner| inner.timeout = timeout.max(Duration::from_secs(1)))
    }

    /// The same service ending its open streams when `stop` is cancelled
    /// (the driver is shutting down).
    #[must_use]
    pub fn with_stop(self, stop: CancellationToken) -> Self {
        self.rebuild(|inner| inner.stop = stop)
    }

    fn rebuild(self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner {
            devices: self.inner.devices.clone(),
            driver: self.inner.driver.clone(),
            pool_name: self.inner.pool_name.clone(),
            timeout: self.inner.timeout,
            stop: self.inner.stop.clone(),
            since: Arc::clone(&self.inner.since),
        };
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The `health_check_timeout_seconds` sent in every update.
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// How often the full list is re-sent without a change: half the
    /// timeout.
    pub fn resend_interval(&self) -> Duration {
        self.inner.timeout / 2
    }

    /// The tonic server of `v1.DRAResourceHealth`.
    pub fn v1_server(&self) -> v1::dra_resource_health_server::DraResourceHealthServer<Self> {
        v1::dra_resource_health_server::DraResourceHealthServer::new(self.clone())
    }

    /// The tonic server of `v1alpha1.DRAResourceHealth`.
    pub fn v1alpha1_server(
        &self,
    ) -> v1alpha1::dra_resource_health_server::DraResourceHealthServer<Self> {
        v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(self.clone())
    }

    /// Starts one stream: a task sends `convert(entries, change times,
    /// timeout)` at once, on every device-set change and every resend
    /// interval.
    fn open<T: Send + 'static>(
        &self,
        version: &'static str,
        convert: fn(Vec<DeviceHealthEntry>, Vec<i64>, i64) -> T,
    ) -> Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>> {
        let inner = Arc::clone(&self.inner);
        let mut devices = inner.devices.clone();
        let (tx, rx) = mpsc::channel(4);
        let timeout_secs = i64::try_from(inner.timeout.as_secs()).unwrap_or(i64::MAX);
        let resend = self.resend_interval();
        tracing::debug!(driver = %inner.driver, version, "NodeWatchResources opened");
        tokio::spawn(async move {
            loop {
                let entries = health_entries(&devices.borrow_and_update(), &inner.pool_name);
                let since = inner.since.stamp(&entries, unix_seconds());
                let message = convert(entries, since, timeout_secs);
                if tx.send(Ok(message)).await.is_err() {
                    break;
                }
                tokio::select! {
                    _ = inner.stop.cancelled() => break,
                    _ = tx.closed() => break,
                    changed = devices.changed() => {
                        if changed.is_err() {
                            break;
                        }
                    }
                    _ = tokio::time::sleep(resend) => {}
                }
            }
            tracing::debug!(driver = %inner.driver, version, "NodeWatchResources closed");
        });
        Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
    }
}

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX)
        })
}

/// Writes the v1 and v1alpha1 conversions, identical but for the module.
macro_rules! health_version {
    ($module:ident, $convert:ident) => {
        fn $convert(
            entries: Vec<DeviceHealthEntry>,
            since: Vec<i64>,
            timeout_secs: i64,
        ) -> $module::NodeWatchResourcesResponse {
            $module::NodeWatchResourcesResponse {
                devices: entries
                    .into_iter()
                    .zip(since)
                    .map(|(entry, since)| $module::DeviceHealth {
                        device: Some($module::DeviceIdentifier {
                            pool_name: entry.pool_name,
                            device_name: entry.device_name,
                        }),
                        health: if entry.healthy {
                            $module::HealthStatus::Healthy
                        } else {
                            $module::HealthStatus::Unhealthy
                        }
                        .into(),
                        last_updated_time: since,
                        health_check_timeout_seconds: timeout_secs,
                        message: entry.message,
                    })
                    .collect(),
            }
        }

        #[tonic::async_trait]
        impl $module::dra_resource_health_server::DraResourceHealth for HealthService {
            type NodeWatchResourcesStream = Pin<
                Box<dyn Stream<Item = Result<$module::NodeWatchResourcesResponse, Status>> + Send>,
            >;

            async fn node_watch_resources(
                &self,
                _request: Request<$module::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                Ok(Response::new(self.open(stringify!($module), $convert)))
            }
        }
    };
}

health_version!(v1, to_v1);
health_version!(v1alpha1, to_v1alpha1);
