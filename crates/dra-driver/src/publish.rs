//! Keeps a DRA driver's ResourceSlices following its resource's device set.
//!
//! [`SliceSync::start`] takes the resource's device-set receiver
//! (`Resource::subscribe`) and a started `PublisherHandle`, and runs two
//! small tasks: one turns every new device set (hardware or health change,
//! live reload) into DRA devices ([`crate::devices::dra_devices`]) and hands
//! them to `PublisherHandle::publish` when they differ from the last ones
//! handed over (the publisher itself writes nothing for an unchanged pool);
//! the other follows the publisher's status into the metrics (every
//! failed pass, published generation and slice count) and the log (an error
//! once when it appears or changes, its recovery, the API server dropping
//! taints). Devices or attributes that cannot be published are logged once
//! per change of that list.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{ApiError, DraDevice, PublishStatus, PublisherHandle};

use crate::devices::{DeviceProblem, dra_devices};
use wdp_resource::device_set::SharedDeviceSet;
use wdp_resource::metrics::Metrics;

/// One driver's running slice synchronisation; owns its publisher.
#[derive(Debug)]
pub struct SliceSync {
    driver: String,
    publisher: Arc<PublisherHandle>,
    status: watch::Receiver<PublishStatus>,
    stop: CancellationToken,
    tasks: [JoinHandle<()>; 2],
}

impl SliceSync {
    /// Publishes `devices`' current set at once, then every change of it,
    /// through `publisher` (which publishes for `driver`), recording the
    /// publisher's progress in `metrics`. Needs a tokio runtime.
    pub fn start(
        driver: impl Into<String>,
        devices: watch::Receiver<SharedDeviceSet>,
        publisher: PublisherHandle,
        metrics: Arc<Metrics>,
    ) -> Self {
        let driver = driver.into();
        let publisher = Arc::new(publisher);
        let status = publisher.status();
        let stop = CancellationToken::new();
        let follow = tokio::spawn(follow_devices(
            driver.clone(),
            devices,
            Arc::clone(&publisher),
            stop.clone(),
        ));
        let report = tokio::spawn(report_status(
            driver.clone(),
            publisher.status(),
            metrics,
            stop.clone(),
        ));
        Self {
            driver,
            publisher,
            status,
            stop,
            tasks: [follow, report],
        }
    }

    /// The driver this synchronises.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The publisher's status (published pool, last error, taints dropped),
    /// for readiness and status reports.
    pub fn status(&self) -> watch::Receiver<PublishStatus> {
        self.status.clone()
    }

    /// Whether the pool has been published and the last attempt succeeded.
    pub fn is_published(&self) -> bool {
        let status = self.status.borrow();
        status.published.is_some() && status.error.is_none()
    }

    /// Stops following the device set and the publisher, leaving the
    /// slices in place (clean shutdown).
    pub async fn stop(self) {
        if let Some(publisher) = self.end().await {
            publisher.stop().await;
        }
    }

    /// Stops, then deletes the driver's slices on this node (the resource
    /// left the configuration); returns how many were deleted.
    pub async fn withdraw(self) -> Result<usize, ApiError> {
        match self.end().await {
            Some(publisher) => publisher.withdraw().await,
            None => Ok(0),
        }
    }

    /// Ends both tasks and takes the publisher back (`None` only if a task
    /// panicked while holding it, which the log then names).
    async fn end(self) -> Option<PublisherHandle> {
        self.stop.cancel();
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::error!(driver = %self.driver, %error, "a ResourceSlice sync task failed");
            }
        }
        Arc::try_unwrap(self.publisher).ok()
    }
}

/// Publishes the current device set, then each changed one.
async fn follow_devices(
    driver: String,
    mut devices: watch::Receiver<SharedDeviceSet>,
    publisher: Arc<PublisherHandle>,
    stop: CancellationToken,
) {
    let mut last_sent: Option<Vec<DraDevice>> = None;
    let mut last_problems: Vec<DeviceProblem> = Vec::new();
    loop {
        let list = dra_devices(&driver, &devices.borrow_and_update());
        if list.problems != last_problems {
            for problem in &list.problems {
                tracing::warn!(driver = %driver, "{problem}");
            }
            last_problems = list.problems;
        }
        if last_sent.as_ref() != Some(&list.devices) {
            tracing::debug!(driver = %driver, devices = list.devices.len(), "publishing the device set");
            publisher.publish(list.devices.clone());
            last_sent = Some(list.devices);
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = devices.changed() => {
                if changed.is_err() {
                    // The resource is gone; its owner withdraws or stops us.
                    stop.cancelled().await;
                    return;
                }
            }
        }
    }
}

/// Follows the publisher's status into metrics and the log.
async fn report_status(
    driver: String,
    mut status: watch::Receiver<PublishStatus>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut last_error: Option<String> = None;
    let mut taints_dropped = false;
    let mut counted_failures = status.borrow().failed_passes;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = status.changed() => {
                if changed.is_err() {
                    stop.cancelled().await;
                    return;
                }
            }
        }
        let current = status.borrow_and_update().clone();
        if let Some(pool) = &current.published {
            metrics.set_dra_published(&driver, pool.generation, pool.slices);
        }
        for _ in counted_failures..current.failed_passes {
            metrics.dra_publish_error(&driver);
        }
        counted_failures = counted_failures.max(current.failed_passes);
        match (&current.error, &last_error) {
            (Some(error), _) => {
                if last_error.as_ref() != Some(error) {
                    tracing::warn!(driver = %driver, "ResourceSlices not published: {error}");
                }
            }
            (None, Some(_)) => {
                tracing::info!(driver = %driver, "ResourceSlices published again");
            }
            (None, None) => {}
        }
        last_error = current.error;
        if current.taints_dropped != taints_dropped {
            taints_dropped = current.taints_dropped;
            if taints_dropped {
                tracing::warn!(
                    driver = %driver,
                    "the API server dropped the device taints of the ResourceSlices (the DRADeviceTaints feature gate is off): unhealthy devices stay schedulable"
                );
            }
        }
    }
}
