//! The publisher's loop: when to reconcile, status and logs.
//!
//! A pass is wanted when the desired devices change, when the watch on the
//! slices reports a change that is not the echo of our own write (a deletion,
//! an edit, a slice we did not create) or restarts (after a disconnection,
//! anything may have happened), and after a failed pass. It runs when
//! [`Pacing`] allows: at most one pass per write interval, and never before a
//! failure's backoff or the server's `Retry-After` ends; wanted changes
//! meanwhile coalesce and the pass then writes the newest list, so a broken
//! or overloaded server is never hammered and a flapping device costs at most
//! one pass per interval. Right before a pass, the write fence is asked
//! whether this publisher may still write (another instance may have taken
//! the pool over); a refused pass waits and asks again. Errors are logged at WARN once per change of error
//! state (what failed, the HTTP status, the wait), recovery at INFO; what
//! the pass left out of the pool at WARN when it changes; a kind of field
//! found dropped by the server at WARN once, followed by another pass that
//! publishes without it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::drops::Dropped;
use super::pacing::Pacing;
use super::reconcile::{Memory, PassOutcome, field_selector, reconcile};
use super::{PublishStatus, PublishedPool};
use crate::error::ApiError;
use crate::plan::PoolTarget;
use crate::pool::PoolContent;
use crate::problem::DeviceProblem;

/// How often a closed write fence is asked again while a pass waits.
const FENCE_RECHECK: Duration = Duration::from_millis(100);

/// Everything the task owns.
pub(crate) struct PublisherTask {
    pub api: Api<ResourceSlice>,
    pub target: PoolTarget,
    pub desired: watch::Receiver<Option<Arc<PoolContent>>>,
    pub write_interval: watch::Receiver<Duration>,
    pub status: watch::Sender<PublishStatus>,
    /// Asked right before every pass; a pass it refuses is not made.
    pub fence: super::WriteFence,
    pub stop: CancellationToken,
}

/// Runs until stopped, the handle is dropped, or shutdown.
pub(crate) async fn run(mut task: PublisherTask) {
    let selector = field_selector(&task.target);
    let mut slice_events = watcher(
        task.api.clone(),
        watcher::Config::default().fields(&selector),
    )
    .default_backoff()
    .boxed();
    let mut memory = Memory::default();
    let mut pacing = Pacing::new(*task.write_interval.borrow_and_update());
    let mut dirty = false;
    let mut log = PassLog::new(&task.target);

    loop {
        // One borrow both reads the list and tells whether it is new: a
        // publish between a separate `has_changed` and this borrow would be
        // marked seen without making the pass dirty, and then lost (no
        // `changed()` fires for it). A publish during the last pass counts
        // the same way.
        let desired = {
            let current = task.desired.borrow_and_update();
            dirty |= current.has_changed();
            current.clone()
        };
        let pending = dirty && desired.is_some();
        if let Some(content) = desired.filter(|_| pending && pacing.allows(Instant::now())) {
            if !(task.fence)() {
                // Another instance publishes now: write nothing, and wait
                // for this task to be stopped (or the fence to open again
                // with the next wanted change).
                tracing::debug!(driver = %log.driver, node = %log.node, "the write fence is closed: this pass is not made");
                task.status.send_modify(|status| status.fenced_passes += 1);
                tokio::select! {
                    _ = task.stop.cancelled() => break,
                    changed = task.desired.changed() => if changed.is_err() { break },
                    _ = tokio::time::sleep(FENCE_RECHECK) => {}
                }
                continue;
            }
            dirty = false;
            pacing.started(Instant::now());
            let was_dropping_taints = memory.taints_dropped;
            let was_dropping = memory.dropped;
            let pass = tokio::select! {
                _ = task.stop.cancelled() => break,
                pass = reconcile(&task.api, &task.target, &content, &mut memory) => pass,
            };
            match pass {
                Ok(outcome) => {
                    pacing.succeeded();
                    log.succeeded(outcome, &task.status, &memory);
                }
                Err(error) => {
                    log.failed(&error, &mut pacing, &mut memory, &task.status);
                    dirty = true;
                }
            }
            log.warn_newly_dropped(&memory, was_dropping_taints, was_dropping);
            // What was written with the dropped fields is rewritten without them.
            dirty |= memory.dropped != was_dropping;
            continue;
        }

        let next_pass = pacing.earliest().filter(|_| pending);
        tokio::select! {
            _ = task.stop.cancelled() => break,
            changed = task.desired.changed() => match changed {
                Ok(()) => dirty = true,
                // The handle was dropped: stop, leaving the slices.
                Err(_) => break,
            },
            // Only armed while a pass waits for pacing, so it is in the future.
            _ = tokio::time::sleep_until(next_pass.unwrap_or_else(Instant::now)), if next_pass.is_some() => {}
            changed = task.write_interval.changed() => match changed {
                Ok(()) => pacing.set_interval(*task.write_interval.borrow_and_update()),
                Err(_) => break,
            },
            event = slice_events.next() => match event {
                Some(Ok(event)) => dirty |= is_foreign_change(&event, &memory),
                Some(Err(error)) => tracing::debug!(driver = %log.driver, node = %log.node, %error, "watching ResourceSlices failed; the watch retries"),
                None => break,
            },
        }
    }
}

/// What the loop last logged about its passes, so that it logs changes
/// only, and the status it keeps after each pass.
struct PassLog {
    driver: String,
    node: String,
    /// The error state of the last pass when it failed: what was done and
    /// the HTTP status.
    last_error: Option<String>,
    /// What the last successful pass left out of the pool.
    last_problems: Vec<DeviceProblem>,
}

impl PassLog {
    fn new(target: &PoolTarget) -> Self {
        Self {
            driver: target.driver.clone(),
            node: target.node_name.clone(),
            last_error: None,
            last_problems: Vec::new(),
        }
    }

    /// Logs a successful pass (recovery, writes, a change in what was left
    /// out) and records it in `status`.
    fn succeeded(
        &mut self,
        outcome: PassOutcome,
        status: &watch::Sender<PublishStatus>,
        memory: &Memory,
    ) {
        let (driver, node) = (&self.driver, &self.node);
        if self.last_error.take().is_some() {
            tracing::info!(%driver, %node, generation = outcome.generation, "publishing ResourceSlices works again");
        }
        if outcome.writes > 0 {
            tracing::debug!(%driver, %node, generation = outcome.generation, slices = outcome.slices, writes = outcome.writes, "published ResourceSlices");
        }
        if outcome.problems != self.last_problems {
            for problem in &outcome.problems {
                tracing::warn!(%driver, %node, "left out of the ResourceSlices: {problem}");
            }
            self.last_problems = outcome.problems.clone();
        }
        status.send_modify(|status| {
            status.published = Some(PublishedPool {
                generation: outcome.generation,
                slices: outcome.slices,
                devices: outcome.devices,
                at: SystemTime::now(),
            });
            status.error = None;
            status.writes += outcome.writes;
            status.passes += 1;
            status.problems = outcome.problems;
            copy_memory(status, memory);
        });
    }

    /// Backs `pacing` off after a failed pass, forgets the server's version
    /// when it refused the write as invalid, logs the failure when the
    /// error state changed and records it in `status`.
    fn failed(
        &mut self,
        error: &ApiError,
        pacing: &mut Pacing,
        memory: &mut Memory,
        status: &watch::Sender<PublishStatus>,
    ) {
        let (driver, node) = (&self.driver, &self.node);
        let summary = error.summary();
        // The server's message may name a generated slice name that
        // changes on every retry; what was done and the status code do not.
        let error_state = match error.http_status() {
            Some(code) => format!("{error}: {code}"),
            None => summary.clone(),
        };
        // A server that refuses what was planned for its version
        // may have been upgraded: ask its version again.
        if error.http_status() == Some(422) {
            memory.version = None;
        }
        let retry_after = error.retry_after();
        let wait = pacing.failed(Instant::now(), retry_after);
        if self.last_error.as_ref() != Some(&error_state) {
            tracing::warn!(%driver, %node, error = %summary, retry_in = ?wait, server_asked = ?retry_after, "publishing ResourceSlices failed; retrying with backoff");
        }
        status.send_modify(|status| {
            status.error = Some(summary.clone());
            status.failed_passes += 1;
            copy_memory(status, memory);
        });
        self.last_error = Some(error_state);
    }

    /// Logs each kind of field the server was found dropping in the last
    /// pass (`memory`) that it was not dropping before it.
    fn warn_newly_dropped(
        &self,
        memory: &Memory,
        was_dropping_taints: bool,
        was_dropping: Dropped,
    ) {
        let (driver, node) = (&self.driver, &self.node);
        if memory.taints_dropped && !was_dropping_taints {
            tracing::warn!(%driver, %node, "the API server dropped the device taints written: the DRADeviceTaints feature seems off on this cluster (as it is before Kubernetes 1.37), so unhealthy devices stay schedulable");
        }
        if memory.dropped.partitions && !was_dropping.partitions {
            tracing::error!(%driver, %node, "the API server dropped sharedCounters/consumesCounters: the DRAPartitionableDevices feature gate is off; publishing whole devices only");
        }
        if memory.dropped.sharing && !was_dropping.sharing {
            tracing::error!(%driver, %node, "the API server dropped allowMultipleAllocations/requestPolicy: the DRAConsumableCapacity feature gate is off; publishing devices without sharing");
        }
    }
}

/// Copies what the publisher learned about the server into `status`.
fn copy_memory(status: &mut PublishStatus, memory: &Memory) {
    status.taints_dropped = memory.taints_dropped;
    status.partitions_dropped = memory.dropped.partitions;
    status.consumable_capacity_dropped = memory.dropped.sharing;
    status.server_version = memory.version;
}

/// Whether a watch event shows a change this publisher did not make itself.
fn is_foreign_change(event: &watcher::Event<ResourceSlice>, memory: &Memory) -> bool {
    match event {
        watcher::Event::Apply(slice) => {
            memory.known.get(&slice.name_any()) != slice.resource_version().as_ref()
        }
        // Our own deletions leave `known` before the event arrives.
        watcher::Event::Delete(slice) => memory.known.contains_key(&slice.name_any()),
        // A (re)started watch: anything may have happened meanwhile.
        watcher::Event::InitDone => true,
        watcher::Event::Init | watcher::Event::InitApply(_) => false,
    }
}
