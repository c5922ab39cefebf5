//! Keeps a DRA driver's ResourceSlices following its resource's device set.
//!
//! [`SliceSync::start`] takes the resource's device-set receiver
//! (`Resource::subscribe`), a way to start a `PublisherHandle`, and whether
//! this instance of the host publishes (see `crate::handover`: during a
//! rolling update only the newest does). While it publishes, one task turns
//! every new device set (hardware or health change, live reload) into DRA
//! devices ([`crate::devices::dra_devices`]) and hands them to
//! `PublisherHandle::publish` when they differ from the last ones handed
//! over (the publisher itself writes nothing for an unchanged pool); when
//! another instance takes over, the publisher stops and the slices stay for
//! it. Another task follows the publisher's status into the metrics (every
//! failed pass, published generation and slice count) and the log (an
//! error once when it appears or changes, its recovery, the API server
//! dropping taints). Devices or attributes that cannot be published are
//! logged once per change of that list; so are the guest taints the API
//! server cannot take, once the publisher has learned its version (see
//! [`crate::taint_fit`]: the effect `None` before 1.35, more taints than
//! the server takes a device).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{ApiError, BindingConditions, PoolContent, PublishStatus, PublisherHandle};

use crate::devices::DeviceProblem;
use crate::metrics::DraMetrics;
use wdp_resource::SharedDeviceSet;

/// Starts a publisher for the driver's pool (each time this instance takes
/// the publishing over).
pub type StartPublisher = Box<dyn FnMut() -> PublisherHandle + Send>;

/// The binding conditions every device of the driver publishes now
/// (`None`: none; a resource with `[passthrough]` has them), asked at
/// every device-set change so a live reload takes effect.
pub type BindingNow = Box<dyn Fn() -> Option<BindingConditions> + Send>;

/// One driver's running slice synchronisation; owns its publisher.
#[derive(Debug)]
pub struct SliceSync {
    driver: String,
    write_interval: watch::Sender<Option<Duration>>,
    status: watch::Receiver<PublishStatus>,
    stop: CancellationToken,
    publishing: JoinHandle<Option<PublisherHandle>>,
    report: JoinHandle<()>,
}

impl SliceSync {
    /// Publishes `devices`' current set at once, then every change of it,
    /// through a publisher `start_publisher` starts (publishing for
    /// `driver`), while `leading` is true, each device with the binding
    /// conditions `binding` gives; records the progress in `metrics`.
    /// Needs a tokio runtime.
    pub fn start(
        driver: impl Into<String>,
        devices: watch::Receiver<SharedDeviceSet>,
        start_publisher: StartPublisher,
        (leading, binding): (watch::Receiver<bool>, BindingNow),
        metrics: Arc<DraMetrics>,
    ) -> Self {
        let driver = driver.into();
        let (status_tx, status) = watch::channel(PublishStatus::default());
        let (write_interval, interval_rx) = watch::channel(None);
        let stop = CancellationToken::new();
        let publishing = tokio::spawn(publish_while_leading(
            driver.clone(),
            devices,
            start_publisher,
            Follow {
                leading,
                write_interval: interval_rx,
                binding,
            },
            status_tx,
            stop.clone(),
        ));
        let report = tokio::spawn(report_status(
            driver.clone(),
            status.clone(),
            metrics,
            stop.clone(),
        ));
        Self {
            driver,
            write_interval,
            status,
            stop,
            publishing,
            report,
        }
    }

    /// Changes the shortest time between two write passes of the pool (a
    /// live reload changed `publish-interval-ms`); applies to the running
    /// publisher and any started later.
    pub fn set_write_interval(&self, interval: Duration) {
        self.write_interval.send_if_modified(|now| {
            let changed = *now != Some(interval);
            *now = Some(interval);
            changed
        });
    }

    /// The driver this synchronises.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The publisher's status (published pool, last error, taints dropped),
    /// for readiness and status reports; counters add up over every
    /// publisher this instance ran.
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
    /// left the configuration); returns how many were deleted. An instance
    /// that does not publish now deletes nothing: the one that publishes
    /// decides.
    pub async fn withdraw(self) -> Result<usize, ApiError> {
        match self.end().await {
            Some(publisher) => publisher.withdraw().await,
            None => Ok(0),
        }
    }

    /// Ends both tasks and takes the publisher back (`None` when this
    /// instance does not publish now, or a task panicked, which the log
    /// then names).
    async fn end(self) -> Option<PublisherHandle> {
        self.stop.cancel();
        if let Err(error) = self.report.await {
            tracing::error!(driver = %self.driver, %error, "the ResourceSlice status task failed");
        }
        match self.publishing.await {
            Ok(publisher) => publisher,
            Err(error) => {
                tracing::error!(driver = %self.driver, %error, "the ResourceSlice sync task failed");
                None
            }
        }
    }
}

/// Counters of the publishers stopped so far, added to the current one's.
#[derive(Clone, Copy, Default)]
struct Earlier {
    writes: u64,
    passes: u64,
    failed_passes: u64,
}

impl Earlier {
    fn add(&self, status: &PublishStatus) -> PublishStatus {
        let mut total = status.clone();
        total.writes += self.writes;
        total.passes += self.passes;
        total.failed_passes += self.failed_passes;
        total
    }
}

/// What the publishing task follows besides the device set.
struct Follow {
    /// Whether this instance publishes.
    leading: watch::Receiver<bool>,
    /// The write interval set since start (`None`: the one the publisher
    /// was started with).
    write_interval: watch::Receiver<Option<Duration>>,
    /// The devices' binding conditions now.
    binding: BindingNow,
}

/// Waits to lead, then publishes until another instance leads or `stop`;
/// returns the publisher running when stopped.
async fn publish_while_leading(
    driver: String,
    mut devices: watch::Receiver<SharedDeviceSet>,
    mut start_publisher: StartPublisher,
    follow: Follow,
    status: watch::Sender<PublishStatus>,
    stop: CancellationToken,
) -> Option<PublisherHandle> {
    let Follow {
        mut leading,
        mut write_interval,
        binding,
    } = follow;
    let mut last_problems: Vec<DeviceProblem> = Vec::new();
    // The guest's taints fitted to the server (the same across publishers).
    let mut server_fit = crate::taint_fit::ServerFit::default();
    let mut earlier = Earlier::default();
    loop {
        // Wait to lead.
        loop {
            if *leading.borrow_and_update() {
                break;
            }
            tokio::select! {
                _ = stop.cancelled() => return None,
                changed = leading.changed() => if changed.is_err() { stop.cancelled().await; return None },
            }
        }
        let publisher = start_publisher();
        if let Some(interval) = *write_interval.borrow_and_update() {
            publisher.set_min_write_interval(interval);
        }
        let mut publisher_status = publisher.status();
        let mut last_sent: Option<PoolContent> = None;
        let mut device_set_changed = true;
        let mut leading_can_change = true;
        let mut interval_can_change = true;
        loop {
            if std::mem::take(&mut device_set_changed) {
                let mut list = server_fit.devices(&driver, &devices.borrow_and_update());
                let conditions = binding();
                for device in &mut list.devices {
                    device.binding.clone_from(&conditions);
                }
                if list.problems != last_problems {
                    for problem in &list.problems {
                        tracing::warn!(driver = %driver, "{problem}");
                    }
                    last_problems = list.problems;
                }
                let content = PoolContent {
                    devices: list.devices,
                    counter_sets: list.counter_sets,
                };
                if last_sent.as_ref() != Some(&content) {
                    tracing::debug!(driver = %driver, devices = content.devices.len(), counter_sets = content.counter_sets.len(), "publishing the device set");
                    publisher.publish_pool(content.clone());
                    last_sent = Some(content);
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return Some(publisher),
                changed = devices.changed() => match changed {
                    Ok(()) => device_set_changed = true,
                    Err(_) => {
                        // The resource is gone; its owner withdraws or stops us.
                        stop.cancelled().await;
                        return Some(publisher);
                    }
                },
                changed = write_interval.changed(), if interval_can_change => match changed {
                    Ok(()) => {
                        if let Some(interval) = *write_interval.borrow_and_update() {
                            publisher.set_min_write_interval(interval);
                        }
                    }
                    Err(_) => interval_can_change = false,
                },
                changed = publisher_status.changed() => if changed.is_ok() {
                    let current = publisher_status.borrow_and_update().clone();
                    device_set_changed |= server_fit.learn(&current);
                    status.send_replace(earlier.add(&current));
                },
                changed = leading.changed(), if leading_can_change => match changed {
                    Ok(()) if !*leading.borrow() => break,
                    Ok(()) => {}
                    // Whether this instance publishes can no longer change.
                    Err(_) => leading_can_change = false,
                },
            }
        }
        let last = publisher_status.borrow().clone();
        earlier = Earlier {
            writes: earlier.writes + last.writes,
            passes: earlier.passes + last.passes,
            failed_passes: earlier.failed_passes + last.failed_passes,
        };
        // The slices stay: the instance that leads now keeps them.
        publisher.stop().await;
    }
}

/// Follows the publisher's status into metrics and the log.
async fn report_status(
    driver: String,
    mut status: watch::Receiver<PublishStatus>,
    metrics: Arc<DraMetrics>,
    stop: CancellationToken,
) {
    let mut last_error: Option<String> = None;
    let mut taints_dropped = false;
    let (mut counted_failures, mut counted_writes) = {
        let first = status.borrow();
        (first.failed_passes, first.writes)
    };
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
            metrics.set_published(&driver, pool.generation, pool.slices);
        }
        for _ in counted_failures..current.failed_passes {
            metrics.publish_error(&driver);
        }
        counted_failures = counted_failures.max(current.failed_passes);
        if current.writes > counted_writes {
            metrics.count_slice_writes(&driver, current.writes - counted_writes);
            counted_writes = current.writes;
        }
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
