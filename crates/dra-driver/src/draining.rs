//! A DRA driver that only unprepares: its resource left the configuration
//! or moved to the device-plugin API, and the claims it prepared are still
//! held. It refuses new prepares, publishes nothing and serves its sockets
//! until the kubelet has unprepared every claim ([`Draining`]).
//!
//! Two ways in: a served driver withdrawn on a running host
//! ([`DraDriver::withdraw`](crate::DraDriver::withdraw)), and
//! [`Draining::start`], for a host that starts after its configuration
//! stopped serving the driver while it was stopped: the checkpoint is read,
//! the driver's ResourceSlices on this node are deleted, and its sockets
//! served for unprepare, without ever publishing a device.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{PoolTarget, WriteFence};
use wdp_resource::Resource;

use crate::api_port::ApiPort;
use crate::checkpoint::Checkpoint;
use crate::driver::{DriverPaths, claim_service, remove_stale_sockets, serve_loop};
use crate::handover::Handover;
use crate::health::HealthService;
use crate::metrics::DraMetrics;
use crate::prepare::ClaimPreparer;

/// The longest wait between two tries at deleting the slices of a driver
/// that only unprepares (the API server unreachable).
const SLICE_DELETE_RETRY_MAX: Duration = Duration::from_secs(30);

/// A driver whose resource left the configuration, serving unprepare for
/// the claims it prepared until none is left.
#[derive(Debug)]
pub struct Draining {
    driver: String,
    preparer: Arc<ClaimPreparer>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Draining {
    /// Serves only the unprepare of the claims `driver`'s checkpoint under
    /// `paths` records, for `resource` (whose devices they are): for a host
    /// that starts after the driver stopped being configured. New prepares
    /// are refused from the first call; nothing is published; the driver's
    /// ResourceSlices on this node are deleted (retried until the API
    /// server answers). `None` when the checkpoint holds no claim.
    pub async fn start(
        resource: Arc<Resource>,
        metrics: Arc<DraMetrics>,
        driver: &str,
        paths: &DriverPaths,
        api: &Arc<dyn ApiPort>,
        parent: &CancellationToken,
    ) -> Option<Self> {
        let checkpoint = Checkpoint::load(&paths.state_dir, driver);
        let claims = checkpoint.claims().len();
        if claims == 0 {
            return None;
        }
        let stop = parent.child_token();
        let (preparer, service) =
            claim_service(&resource, &metrics, driver, paths, api, checkpoint, &stop);
        preparer.start_draining();
        let health = HealthService::new(resource.subscribe(), driver, paths.node_name.clone())
            .with_stop(stop.clone());
        remove_stale_sockets(paths, driver);
        // Taking the publishing over stops an older instance's publisher
        // (a rolling update) before the slices go.
        let handover = Handover::start(&paths.state_dir, driver, &paths.instance_id(), &stop);
        tokio::spawn(delete_slices(
            Arc::clone(api),
            PoolTarget::new(driver, paths.node_name.clone()),
            handover.write_fence(),
            stop.clone(),
        ));
        let (registered, _) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(serve_loop(
            driver.to_owned(),
            paths.clone(),
            service,
            health,
            Arc::new(registered),
            metrics.kubelet.registration_observer(),
            stop.clone(),
        ));
        tracing::info!(%driver, resource = %resource.name(), claims, "the driver is no longer served through DRA but its checkpoint holds prepared claims: it serves their unprepare until none is left, publishes nothing, and its ResourceSlices on this node are deleted");
        Some(Self::follow(
            driver.to_owned(),
            preparer,
            handover,
            stop,
            task,
        ))
    }

    /// Serves until every claim of `preparer` is unprepared (or `stop`),
    /// then stops `task` (the sockets) and `handover`.
    pub(crate) fn follow(
        driver: String,
        preparer: Arc<ClaimPreparer>,
        handover: Handover,
        stop: CancellationToken,
        task: JoinHandle<()>,
    ) -> Self {
        let drained = stop.clone();
        let name = driver.clone();
        let still_prepared = preparer.clone();
        let drain = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = drained.cancelled() => break,
                    left = preparer.wait_for_unprepare(Duration::from_secs(1)) => if left == 0 {
                        tracing::info!(driver = %name, "every claim unprepared: the driver stops");
                        break;
                    },
                }
            }
            drained.cancel();
            let _ = task.await;
            handover.stop().await;
        });
        Self {
            driver,
            preparer: still_prepared,
            stop,
            task: drain,
        }
    }

    /// The driver name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// A view of the claims it still serves, for following them while the
    /// resource moves to the device-plugin API.
    pub fn claims(&self) -> DrainingClaims {
        DrainingClaims {
            preparer: self.preparer.clone(),
        }
    }

    /// Whether every claim was unprepared and the sockets are gone.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops serving now (shutdown, or the driver is configured again: the
    /// new one serves the claims left, from the checkpoint).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// The claims a [`Draining`] driver still serves.
#[derive(Clone, Debug)]
pub struct DrainingClaims {
    preparer: Arc<ClaimPreparer>,
}

impl DrainingClaims {
    /// The device IDs (the hardware: a partition's parent) the claims
    /// still prepared hold: what the device-plugin API must not offer
    /// while the resource moves back to it.
    pub async fn held_device_ids(&self) -> BTreeSet<String> {
        self.preparer
            .prepared_claims()
            .await
            .into_values()
            .flat_map(|claim| claim.devices)
            .map(|device| device.partition_of.unwrap_or(device.device_id))
            .collect()
    }

    /// Waits until a claim is unprepared or `at_most` passed; answers how
    /// many claims are left.
    pub async fn wait_for_unprepare(&self, at_most: Duration) -> usize {
        self.preparer.wait_for_unprepare(at_most).await
    }
}

/// Deletes every ResourceSlice of `target`'s driver on its node through a
/// publisher that never publishes, trying again with backoff until the API
/// server answers or `stop`.
async fn delete_slices(
    api: Arc<dyn ApiPort>,
    target: PoolTarget,
    fence: WriteFence,
    stop: CancellationToken,
) {
    let mut retry = Duration::from_secs(1);
    loop {
        let publisher = api.spawn_publisher(target.clone(), fence.clone(), &stop);
        match publisher.withdraw().await {
            Ok(deleted) => {
                tracing::info!(driver = %target.driver, deleted, "ResourceSlices of a driver no longer served deleted");
                return;
            }
            Err(error) => {
                tracing::error!(driver = %target.driver, %error, retry_in = ?retry, "cannot delete the ResourceSlices of a driver no longer served; they stay published (new prepares are refused) until the API server answers");
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(retry) => {}
        }
        retry = (retry * 2).min(SLICE_DELETE_RETRY_MAX);
    }
}
