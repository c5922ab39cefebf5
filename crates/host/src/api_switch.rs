//! Moving a resource between the kubelet APIs on a running node, both
//! ways, with its containers running and no device given to two
//! consumers (docs/api-switch.md tells the whole sequence, the kubelet's
//! side included).
//!
//! **Device plugin → DRA** ([`to_dra`]). The device-plugin server stays
//! registered but offers nothing (every device `Unhealthy`: the kubelet's
//! allocatable count drops to 0, so no new pod gets a device through it,
//! and the scheduler sends new pods asking for the extended resource the
//! DRA way; containers holding devices still start again through it). The
//! DRA driver starts with every device withheld, and a follower reads the
//! kubelet's PodResources `List` once a second: the devices containers
//! hold through the device plugin (and those an `Allocate` answered in the
//! last [`RECENT_GRANTS`], which the kubelet may not list yet) stay
//! withheld, the rest are published. When nothing is held any more the
//! device-plugin server stops and the switch record goes. A PodResources
//! socket missing, slow or answering garbage leaves what is withheld as it
//! is (all of it, before the first good answer; what was published already
//! stays published, which is safe), says so once at ERROR with the socket
//! and the error (and once at INFO when it answers again), sets
//! `holdings_unreadable{source="pod-resources"}`, and is tried again with
//! backoff.
//!
//! **DRA → device plugin** ([`to_device_plugin`]). The DRA driver
//! withdraws its slices and refuses new prepares, but keeps unpreparing
//! the claims it prepared; the device-plugin server starts with the
//! devices those claims hold withheld (`Unhealthy`), and a follower
//! offers each as its claims are unprepared. A host that starts may follow
//! the claims of several drivers at once (checkpoints of drivers no longer
//! configured that hold the resource's devices).
//!
//! Either follower is ended early by a switch back (the other direction
//! then starts from where this one stood) or by shutdown; the record in
//! the state folder ([`crate::switch_record`]) lets a restarting host
//! resume.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use wdp_device_plugin::ServerHandle;
use wdp_dra_driver::DrainingClaims;
use wdp_kubelet_socket::{PodResourcesError, PodResourcesReader};
use wdp_resource::{DeviceSet, Resource, Withholding};

use crate::metrics::Metrics;
use crate::switch_record::SwitchRecord;

/// How often the kubelet's PodResources is read while devices are held:
/// a device a container gave back is offered through DRA at most this
/// long after the kubelet stops listing it (plus one slice write).
pub const POD_RESOURCES_POLL: Duration = Duration::from_secs(1);

/// The longest wait between two tries of an unreadable PodResources.
pub const POD_RESOURCES_RETRY_MAX: Duration = Duration::from_secs(10);

/// How long after an `Allocate` answer its devices count as held whatever
/// PodResources says (the kubelet records them right after the answer;
/// this covers a `List` that raced it).
pub const RECENT_GRANTS: Duration = Duration::from_secs(2);

/// How long the read before the DRA driver starts may take: the reload
/// waits for it.
const FIRST_READ_TIMEOUT: Duration = Duration::from_secs(1);

/// Why devices are withheld from DRA before PodResources was read.
const UNKNOWN_HOLDINGS: &str = "which devices running containers hold through the device-plugin API is not known yet (the kubelet's PodResources was not read)";
/// Why devices are withheld from DRA.
const HELD_BY_DEVICE_PLUGIN: &str = "held by running containers through the device-plugin API";
/// Why devices are withheld from the device plugin.
const HELD_BY_DRA: &str = "held by prepared DRA claims";

/// A handover under way; ended by [`finish`](Self::finish) or on its own.
#[derive(Debug)]
pub(crate) struct Handover {
    /// Which way.
    pub(crate) direction: Direction,
    stop: CancellationToken,
    /// Cancelled once its task has returned (on its own or stopped).
    ended: CancellationToken,
}

/// Which way a handover goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// From the device plugin to DRA.
    ToDra,
    /// From DRA to the device plugin.
    ToDevicePlugin,
}

impl Handover {
    /// Whether it finished on its own (nothing held any more).
    pub(crate) fn is_finished(&self) -> bool {
        self.ended.is_cancelled()
    }

    /// Resolves once it has ended: what it withheld is offered and its
    /// switch record is gone (or it was stopped).
    pub(crate) fn ended(&self) -> WaitForCancellationFutureOwned {
        self.ended.clone().cancelled_owned()
    }

    /// Runs `follow` as a handover going `direction`.
    fn spawn(
        direction: Direction,
        stop: CancellationToken,
        follow: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        let ended = CancellationToken::new();
        let guard = ended.clone().drop_guard();
        tokio::spawn(async move {
            let _ended = guard;
            follow.await;
        });
        Self {
            direction,
            stop,
            ended,
        }
    }

    /// Ends it now (a switch back, the resource removed, shutdown): a
    /// retiring device-plugin server stops and its socket goes; what the
    /// new API withholds stays as it is until the next handover sets it.
    pub(crate) async fn finish(self) {
        self.stop.cancel();
        self.ended().await;
    }
}

/// Where a follower reads and records.
#[derive(Clone, Debug)]
pub(crate) struct SwitchPaths {
    /// The kubelet's PodResources socket.
    pub(crate) pod_resources: PodResourcesReader,
    /// The host's state folder (the switch record).
    pub(crate) state_dir: PathBuf,
    /// Where an unreadable PodResources is shown.
    pub(crate) metrics: Arc<Metrics>,
}

/// Starts the device plugin → DRA handover of `dra` (the resource the
/// DRA driver serves, not launched yet: it must start withholding).
/// `retiring` is the device-plugin server, `served` the resource it
/// served (to read its kubelet IDs and latest grants).
pub(crate) async fn to_dra(
    paths: &SwitchPaths,
    record: &SwitchRecord,
    retiring: ServerHandle,
    served: Arc<Resource>,
    dra: Arc<Resource>,
) -> Handover {
    retiring.set_retiring(true);
    dra.set_withholding(Withholding::all(UNKNOWN_HOLDINGS));
    write_record(paths, record);
    let stop = CancellationToken::new();
    let follower = DevicePluginHoldings {
        reader: paths.pod_resources.clone(),
        state_dir: paths.state_dir.clone(),
        metrics: paths.metrics.clone(),
        served,
        dra,
    };
    // One read before the driver starts, so that its first slices offer
    // what is free already (a failure here is logged by the follower).
    let first = paths.pod_resources.clone().with_timeout(FIRST_READ_TIMEOUT);
    let _ = follower.read(&first).await;
    let follow = follower.follow(retiring, stop.clone());
    Handover::spawn(Direction::ToDra, stop, follow)
}

/// Starts the DRA → device plugin handover of `device_plugin` (not
/// launched yet: it must start withholding) from the draining drivers'
/// `claims`.
pub(crate) async fn to_device_plugin(
    paths: &SwitchPaths,
    record: &SwitchRecord,
    claims: Vec<DrainingClaims>,
    device_plugin: Arc<Resource>,
) -> Handover {
    device_plugin.set_withholding(Withholding::some(held_by(&claims).await, HELD_BY_DRA));
    write_record(paths, record);
    let stop = CancellationToken::new();
    let state_dir = paths.state_dir.clone();
    let follow = follow_claims(claims, device_plugin, state_dir, stop.clone());
    Handover::spawn(Direction::ToDevicePlugin, stop, follow)
}

fn write_record(paths: &SwitchPaths, record: &SwitchRecord) {
    if let Err(error) = record.write(&paths.state_dir) {
        tracing::warn!(resource = %record.resource, state_dir = %paths.state_dir.display(), %error, "cannot record the API switch: a host restarted before the handover finished offers every device at once");
    }
}

/// The devices the claims of every driver in `claims` hold.
async fn held_by(claims: &[DrainingClaims]) -> BTreeSet<String> {
    let mut held = BTreeSet::new();
    for driver in claims {
        held.extend(driver.held_device_ids().await);
    }
    held
}

/// Offers each device through the device plugin as the claims holding it
/// are unprepared.
async fn follow_claims(
    claims: Vec<DrainingClaims>,
    resource: Arc<Resource>,
    state_dir: PathBuf,
    stop: CancellationToken,
) {
    loop {
        let held = held_by(&claims).await;
        let done = held.is_empty();
        resource.set_withholding(Withholding::some(held, HELD_BY_DRA));
        if done {
            break;
        }
        let unprepared = claims
            .iter()
            .map(|driver| Box::pin(driver.wait_for_unprepare(POD_RESOURCES_POLL)));
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = futures::future::select_all(unprepared) => {}
        }
    }
    tracing::info!(resource = %resource.name(), "every DRA claim of the resource is unprepared: the device-plugin API offers every device");
    SwitchRecord::remove(&state_dir, resource.name());
}

/// Follows which devices containers hold through the device plugin.
struct DevicePluginHoldings {
    reader: PodResourcesReader,
    state_dir: PathBuf,
    metrics: Arc<Metrics>,
    served: Arc<Resource>,
    dra: Arc<Resource>,
}

impl DevicePluginHoldings {
    /// Reads PodResources once through `reader` and withholds from DRA
    /// what containers hold; answers whether anything is held.
    async fn read(&self, reader: &PodResourcesReader) -> Result<bool, PodResourcesError> {
        let kubelet_ids = reader.device_plugin_holdings(self.dra.name()).await?;
        let mut held = device_ids(&self.served.devices(), kubelet_ids);
        held.extend(self.served.granted_within(RECENT_GRANTS));
        let any = !held.is_empty();
        self.dra
            .set_withholding(Withholding::some(held, HELD_BY_DEVICE_PLUGIN));
        Ok(any)
    }

    /// Reads PodResources until nothing is held (then stops the retiring
    /// server) or `stop`.
    async fn follow(self, retiring: ServerHandle, stop: CancellationToken) {
        let name = self.dra.name().to_owned();
        let mut retry = POD_RESOURCES_POLL;
        let mut failing = false;
        loop {
            let read = self.read(&self.reader).await;
            if read.is_ok() && failing {
                failing = false;
                self.metrics
                    .host
                    .set_holdings_unreadable(&name, "pod-resources", false);
                tracing::info!(resource = %name, socket = %self.reader.socket().display(), "the kubelet's PodResources answers again: DRA offers what no container holds");
            }
            let wait = match read {
                Ok(false) => break,
                Ok(true) => {
                    retry = POD_RESOURCES_POLL;
                    POD_RESOURCES_POLL
                }
                Err(error) => {
                    let withheld = self
                        .dra
                        .withholding()
                        .count(self.dra.devices().devices_advertised().len());
                    if !failing {
                        failing = true;
                        self.metrics
                            .host
                            .set_holdings_unreadable(&name, "pod-resources", true);
                        tracing::error!(resource = %name, %error, withheld, "cannot tell which devices running containers hold through the device-plugin API: what is withheld from DRA stays withheld (what was published stays published) until the kubelet's PodResources answers; tried again with backoff");
                    } else {
                        tracing::debug!(resource = %name, %error, withheld, retry_in = ?retry, "PodResources still unreadable");
                    }
                    let wait = retry;
                    retry = (retry * 2).min(POD_RESOURCES_RETRY_MAX);
                    wait
                }
            };
            tokio::select! {
                _ = stop.cancelled() => {
                    self.metrics
                        .host
                        .set_holdings_unreadable(&name, "pod-resources", false);
                    retiring.stop().await;
                    return;
                }
                _ = tokio::time::sleep(wait) => {}
            }
        }
        tracing::info!(resource = %name, "no container holds a device through the device-plugin API any more: its server stops, DRA offers every device");
        retiring.stop().await;
        SwitchRecord::remove(&self.state_dir, &name);
    }
}

/// The device IDs (the hardware) of the kubelet IDs `kubelet_ids` of
/// `set`; an ID the set does not know (its device gone) stays as it is.
fn device_ids(set: &DeviceSet, kubelet_ids: BTreeSet<String>) -> BTreeSet<String> {
    kubelet_ids
        .into_iter()
        .map(|id| match set.get(&id) {
            Some(device) => device.device.device_id.clone(),
            None => id,
        })
        .collect()
}

#[cfg(test)]
#[path = "api_switch_tests.rs"]
mod tests;
