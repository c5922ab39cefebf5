//! The ResourceSlice publisher: one tokio task per pool keeping the API
//! server's slices equal to the latest device list it was given.
//!
//! [`SlicePublisher::spawn`] starts the task and returns a [`PublisherHandle`].
//! [`PublisherHandle::publish_pool`] (or [`PublisherHandle::publish`] for
//! whole devices only) only records the desired pool (the latest wins, so a
//! burst of calls coalesces into few writes); the task reconciles
//! (see [`reconcile`]) whenever the desired list changes or a watch on the
//! slices shows a change it did not make itself (the kubelet wiping the node's
//! slices, an edit), at most once per write interval, and retries failures
//! with jittered exponential backoff that honours the server's `Retry-After`
//! (see [`pacing`] and [`task`]). It learns the server's version once and
//! plans for it, leaves out what [`crate::validate_pool`] flags, and notices
//! fields the server drops (see [`drops`]). Its progress is on
//! [`PublisherHandle::status`].

mod drops;
mod pacing;
mod reconcile;
mod task;

pub use pacing::{DEFAULT_MIN_WRITE_INTERVAL, MAX_RETRY_AFTER};

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::device::DraDevice;
use crate::error::ApiError;
use crate::plan::PoolTarget;
use crate::pool::PoolContent;
use crate::problem::DeviceProblem;
use crate::version::ServerVersion;

/// What the publisher has achieved so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishStatus {
    /// The pool as last confirmed on the server; `None` before the first success.
    pub published: Option<PublishedPool>,
    /// Why the last attempt failed, on one line naming driver and node;
    /// `None` once an attempt succeeds.
    pub error: Option<String>,
    /// The API server dropped the taints written (the DRADeviceTaints feature
    /// seems off), so unhealthy devices stay schedulable.
    pub taints_dropped: bool,
    /// The API server dropped the `sharedCounters`/`consumesCounters` written
    /// (the DRAPartitionableDevices feature gate is off): from then on only
    /// whole devices are published, without counters.
    pub partitions_dropped: bool,
    /// The API server dropped `allowMultipleAllocations` and the capacities'
    /// `requestPolicy` (the DRAConsumableCapacity feature gate is off): from
    /// then on devices are published without sharing.
    pub consumable_capacity_dropped: bool,
    /// The API server's version, once learned.
    pub server_version: Option<ServerVersion>,
    /// What the last pass left out of the pool and why (see
    /// [`crate::validate_pool`]); empty when everything was published.
    pub problems: Vec<DeviceProblem>,
    /// Write requests (create, replace, delete) made so far.
    pub writes: u64,
    /// Reconcile passes completed so far, with or without writes.
    pub passes: u64,
    /// Passes that failed so far (each retried after a growing delay).
    pub failed_passes: u64,
    /// Passes the write fence held back (another instance publishes).
    pub fenced_passes: u64,
}

/// The pool as a successful pass left it on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedPool {
    /// The pool generation in every slice.
    pub generation: i64,
    /// How many slices the pool has.
    pub slices: usize,
    /// How many devices they hold.
    pub devices: usize,
    /// When that pass ended.
    pub at: SystemTime,
}

/// Whether a publisher may write now; asked right before every pass.
pub type WriteFence = Arc<dyn Fn() -> bool + Send + Sync>;

/// Starts publishers (a namespace for [`SlicePublisher::spawn`]).
#[derive(Debug)]
pub struct SlicePublisher;

impl SlicePublisher {
    /// Starts the publisher task of `target` on the current tokio runtime,
    /// with its `min_write_interval` (see
    /// [`PublisherHandle::set_min_write_interval`]). It
    /// writes nothing before the first [`PublisherHandle::publish`], and ends
    /// when `shutdown` is cancelled, the handle is stopped, withdrawn or
    /// dropped; none of these removes the slices except `withdraw`.
    pub fn spawn(
        client: Client,
        target: PoolTarget,
        shutdown: CancellationToken,
    ) -> PublisherHandle {
        Self::spawn_fenced(client, target, Arc::new(|| true), shutdown)
    }

    /// [`Self::spawn`], asking `fence` right before every pass whether this
    /// publisher may still write: a pass it refuses is not made (the wanted
    /// change stays pending, written when the fence allows again). The host
    /// passes a fence that reads, at that very moment, which instance
    /// publishes, so an instance that another has just taken over from
    /// writes nothing more, however late it learns it otherwise.
    pub fn spawn_fenced(
        client: Client,
        target: PoolTarget,
        fence: WriteFence,
        shutdown: CancellationToken,
    ) -> PublisherHandle {
        let api: Api<ResourceSlice> = Api::all(client);
        let (desired_sender, desired_receiver) = watch::channel(None);
        let (status_sender, status_receiver) = watch::channel(PublishStatus::default());
        let (interval_sender, interval_receiver) = watch::channel(target.min_write_interval);
        let stop = shutdown.child_token();
        let task = tokio::spawn(task::run(task::PublisherTask {
            api: api.clone(),
            target: target.clone(),
            desired: desired_receiver,
            write_interval: interval_receiver,
            status: status_sender,
            fence,
            stop: stop.clone(),
        }));
        PublisherHandle {
            api,
            target,
            desired: desired_sender,
            write_interval: interval_sender,
            status: status_receiver,
            stop,
            task,
        }
    }
}

/// The controls of one running publisher.
#[derive(Debug)]
pub struct PublisherHandle {
    api: Api<ResourceSlice>,
    target: PoolTarget,
    desired: watch::Sender<Option<Arc<PoolContent>>>,
    write_interval: watch::Sender<Duration>,
    status: watch::Receiver<PublishStatus>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl PublisherHandle {
    /// Sets the devices to publish, whole devices with no counter sets.
    /// Never blocks; the latest call wins.
    pub fn publish(&self, devices: Vec<DraDevice>) {
        self.publish_pool(PoolContent::from_devices(devices));
    }

    /// Sets the pool to publish: devices (partitions among them) and the
    /// counter sets they consume. Never blocks; the latest call wins.
    pub fn publish_pool(&self, content: PoolContent) {
        self.desired.send_replace(Some(Arc::new(content)));
    }

    /// Sets the shortest time between the starts of two passes (each of
    /// which lists the pool and writes what differs): a change during the
    /// interval waits for its end, and only the newest list is written.
    /// Applies from the last pass's start. `Duration::ZERO` removes the bound.
    pub fn set_min_write_interval(&self, interval: Duration) {
        self.write_interval.send_replace(interval);
    }

    /// The publisher's status, updated after every pass or failure.
    pub fn status(&self) -> watch::Receiver<PublishStatus> {
        self.status.clone()
    }

    /// Where this publisher publishes.
    pub fn target(&self) -> &PoolTarget {
        &self.target
    }

    /// Stops the publisher and deletes every slice of its driver on its node
    /// (the resource left the configuration); returns how many it deleted.
    pub async fn withdraw(self) -> Result<usize, ApiError> {
        let Self {
            api,
            target,
            stop,
            task,
            ..
        } = self;
        stop.cancel();
        if task.await.is_err() {
            return Err(ApiError::PublisherGone {
                action: "withdrawing ResourceSlices".to_owned(),
                target: target.describe(),
            });
        }
        let slices = reconcile::list_slices(&api, &target).await?;
        for slice in &slices {
            reconcile::delete_slice(&api, &target, &slice.name_any()).await?;
        }
        tracing::info!(driver = %target.driver, node = %target.node_name, deleted = slices.len(), "withdrew ResourceSlices");
        Ok(slices.len())
    }

    /// Stops the publisher, leaving its slices in place (a clean shutdown: the
    /// kubelet removes a gone driver's slices after its grace period).
    pub async fn stop(self) {
        self.stop.cancel();
        if let Err(error) = self.task.await {
            tracing::error!(driver = %self.target.driver, node = %self.target.node_name, %error, "the ResourceSlice publisher task failed");
        }
    }
}
