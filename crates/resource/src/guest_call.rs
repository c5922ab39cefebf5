//! The one path every guest call of a resource takes, whatever the hook:
//! the call context (limits, the resource's config, hardware access scoped
//! to its candidates), the call off the async workers' task queues,
//! validation of the answer, metrics, and logs that speak once per change
//! of state — one WARN when a hook starts failing, one INFO when it
//! recovers — with structured `resource`, `guest` and `hook` fields.
//!
//! Where a call runs: a guest that imports the `hardware` interface may
//! block in a host import (a sysfs read on a hung driver), which no epoch
//! deadline can interrupt, so its calls go to tokio's blocking pool and the
//! caller gives up after the deadline plus a grace (`BACKSTOP_GRACE`, 2 s: the
//! backstop). Any other guest can only compute, and its calls end by their
//! deadline: they run on the calling worker thread inside
//! `tokio::task::block_in_place`, which hands the worker's other tasks to
//! another thread first. That saves waiting for a blocking thread to wake
//! and then for the worker to wake again: half of a small call's time in
//! the host (see the `guest_vs_native` bench). Calls for a DRA claim do
//! the same: the DRA driver prepares each claim of a request in a task of
//! its own, so an in-place call holds up no other claim.
//!
//! No lock is held across a guest call: what a call reads comes in as
//! shared, immutable snapshots.

use std::any::Any;
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use wdp_hardware::{Candidate, HostRoot};
use wdp_policy::{CallContext, CallError, CallErrorKind, Guest, Hook};

use prometheus_client::metrics::gauge::Gauge;
use wdp_config::HookBinding;

use crate::metrics::{GuestLabels, ResourceMetrics};
use crate::services::ResourceServices;
use crate::spec::{ResourceSpec, limits};

/// How long past a call's own deadline the host waits before giving up on
/// it (a host import that blocks is the only way to get there).
const BACKSTOP_GRACE: Duration = Duration::from_secs(2);

/// A failed guest call as the host sees it. Every message names the guest
/// and the hook.
#[derive(Debug, thiserror::Error)]
pub enum GuestFailure {
    /// The call itself failed: trap, deadline, memory cap, the guest's own
    /// error.
    #[error(transparent)]
    Call(CallError),
    /// The guest answered something the host refuses to pass on.
    #[error("guest {guest:?} hook {hook} gave an invalid answer: {problem}")]
    Invalid {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// What is wrong with the answer.
        problem: String,
    },
    /// The call did not come back even after its deadline plus a grace.
    #[error("guest {guest:?} hook {hook} did not return within {waited:?}")]
    Backstop {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// How long the host waited.
        waited: Duration,
    },
    /// The host panicked while running the call (a bug).
    #[error("guest {guest:?} hook {hook} panicked in the host: {detail}")]
    Panicked {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The join error.
        detail: String,
    },
}

impl GuestFailure {
    /// The `result` label of the `guest_calls` metric.
    fn label(&self) -> &'static str {
        match self {
            GuestFailure::Call(e) => match e.kind() {
                CallErrorKind::Timeout => "timeout",
                CallErrorKind::OutOfMemory => "out-of-memory",
                CallErrorKind::GuestError => "guest-error",
                CallErrorKind::Instantiate => "instantiate",
                CallErrorKind::NotExported => "not-exported",
                CallErrorKind::Trap => "trap",
            },
            GuestFailure::Invalid { .. } => "invalid-answer",
            GuestFailure::Backstop { .. } => "timeout",
            GuestFailure::Panicked { .. } => "trap",
        }
    }

    /// The guest that failed and its hook.
    pub fn guest_and_hook(&self) -> (&str, Hook) {
        match self {
            GuestFailure::Call(error) => (error.guest(), error.hook()),
            GuestFailure::Invalid { guest, hook, .. }
            | GuestFailure::Backstop { guest, hook, .. }
            | GuestFailure::Panicked { guest, hook, .. } => (guest, *hook),
        }
    }

    /// Whether the guest ran out of time: its deadline, or the host's
    /// backstop after it.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            GuestFailure::Call(CallError::Timeout { .. }) | GuestFailure::Backstop { .. }
        )
    }

    /// A pre-start guest's deliberate refusal: its answer, not a fault.
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            GuestFailure::Call(CallError::GuestError {
                hook: Hook::PreStart,
                ..
            })
        )
    }
}

tokio::task_local! {
    /// The DRA claim being prepared: guest calls made inside
    /// [`with_claim`] see it through the `claim` import; everywhere else
    /// (device-plugin calls) the import answers `none`.
    static CURRENT_CLAIM: Option<Arc<wdp_policy::ClaimInfo>>;
}

/// Runs `work` with `claim` as the claim every guest call in it sees.
pub async fn with_claim<F: std::future::Future>(
    claim: Arc<wdp_policy::ClaimInfo>,
    work: F,
) -> F::Output {
    CURRENT_CLAIM.scope(Some(claim), work).await
}

/// Calls the guests of one resource.
pub(crate) struct GuestCaller {
    resource: String,
    root: HostRoot,
    metrics: Arc<ResourceMetrics>,
    /// Hooks whose latest call failed (for once-per-change logging).
    failing: Mutex<BTreeSet<Hook>>,
    /// Total time spent in [`call_blocking`](Self::call_blocking) calls
    /// (nanoseconds): what a refresh subtracts to know its own cost.
    blocking_nanos: AtomicU64,
}

impl std::fmt::Debug for GuestCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestCaller")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl GuestCaller {
    /// A caller for the guests of `resource`, reading hardware under `root`.
    pub fn new(resource: &str, root: HostRoot, metrics: Arc<ResourceMetrics>) -> Self {
        Self {
            resource: resource.to_owned(),
            root,
            metrics,
            failing: Mutex::new(BTreeSet::new()),
            blocking_nanos: AtomicU64::new(0),
        }
    }

    /// Time spent waiting for guests in
    /// [`call_blocking`](Self::call_blocking) so far, all calls together.
    pub fn blocking_time(&self) -> Duration {
        Duration::from_nanos(self.blocking_nanos.load(Ordering::Relaxed))
    }

    fn context(
        &self,
        spec: &ResourceSpec,
        binding: &HookBinding,
        candidates: Arc<Vec<Candidate>>,
        generation: Option<u64>,
    ) -> CallContext {
        let claim = CURRENT_CLAIM.try_with(Clone::clone).ok().flatten();
        CallContext {
            limits: limits(binding),
            services: Arc::new(ResourceServices::new(
                self.root.clone(),
                candidates,
                spec.config.writable_attributes.clone(),
            )),
            config: Arc::new(spec.config.guest_config.clone()),
            resource: spec.config.resource.clone(),
            generation,
            claim,
        }
    }

    /// Calls `guest` on this thread (a blocking one), validates the answer
    /// with `check`, and records the outcome.
    pub fn call_blocking<T>(
        &self,
        spec: &ResourceSpec,
        binding: &HookBinding,
        guest: &Guest,
        candidates: Arc<Vec<Candidate>>,
        call: impl FnOnce(&Guest, &CallContext) -> Result<T, CallError>,
        check: impl FnOnce(&T) -> Result<(), String>,
    ) -> Result<T, GuestFailure> {
        let ctx = self.context(spec, binding, candidates, None);
        let started = Instant::now();
        let _in_flight = self.in_flight(binding, guest.name());
        let result = invoke(guest, binding.hook, &ctx, call, check);
        let elapsed = started.elapsed();
        self.blocking_nanos.fetch_add(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        self.record(binding, guest.name(), &result, elapsed);
        result
    }

    /// Calls `guest` without holding up the async workers' other tasks:
    /// in place for a guest that cannot block in a host import, else on a
    /// blocking thread, giving up after the call's deadline plus a grace
    /// should it not come back (see the module docs). Validates and
    /// records as [`call_blocking`](Self::call_blocking).
    pub async fn call<T: Send + 'static>(
        &self,
        spec: &ResourceSpec,
        binding: &HookBinding,
        guest: &Arc<Guest>,
        candidates: Arc<Vec<Candidate>>,
        call: impl FnOnce(&Guest, &CallContext) -> Result<T, CallError> + Send + 'static,
        check: impl FnOnce(&T) -> Result<(), String> + Send + 'static,
    ) -> Result<T, GuestFailure> {
        self.call_in_generation(None, spec, binding, guest, candidates, call, check)
            .await
    }

    /// As [`call`](Self::call), for a call that belongs to one device-set
    /// generation ([`crate::DeviceSet::generation`]): the guest may serve it
    /// from an instance kept warm since an earlier call of that generation
    /// ([`CallContext::generation`]). `None` is [`call`](Self::call).
    #[allow(clippy::too_many_arguments, reason = "call plus the generation")]
    pub async fn call_in_generation<T: Send + 'static>(
        &self,
        generation: Option<u64>,
        spec: &ResourceSpec,
        binding: &HookBinding,
        guest: &Arc<Guest>,
        candidates: Arc<Vec<Candidate>>,
        call: impl FnOnce(&Guest, &CallContext) -> Result<T, CallError> + Send + 'static,
        check: impl FnOnce(&T) -> Result<(), String> + Send + 'static,
    ) -> Result<T, GuestFailure> {
        let ctx = self.context(spec, binding, candidates, generation);
        let hook = binding.hook;
        let started = Instant::now();
        let in_flight = self.in_flight(binding, guest.name());
        let result = if runs_in_place(guest) {
            let outcome = tokio::task::block_in_place(|| {
                std::panic::catch_unwind(AssertUnwindSafe(|| {
                    invoke(guest, hook, &ctx, call, check)
                }))
            });
            drop(in_flight);
            outcome.unwrap_or_else(|panic| {
                Err(GuestFailure::Panicked {
                    guest: guest.name().to_owned(),
                    hook,
                    detail: panic_message(panic.as_ref()),
                })
            })
        } else {
            let for_call = guest.clone();
            let task = tokio::task::spawn_blocking(move || {
                let _in_flight = in_flight;
                invoke(&for_call, hook, &ctx, call, check)
            });
            let waited = binding.timeout + BACKSTOP_GRACE;
            match tokio::time::timeout(waited, task).await {
                Ok(Ok(result)) => result,
                Ok(Err(join)) => Err(GuestFailure::Panicked {
                    guest: guest.name().to_owned(),
                    hook,
                    detail: join.to_string(),
                }),
                Err(_) => Err(GuestFailure::Backstop {
                    guest: guest.name().to_owned(),
                    hook,
                    waited,
                }),
            }
        };
        self.record(binding, guest.name(), &result, started.elapsed());
        result
    }

    /// Counts a call as running until the returned guard is dropped.
    fn in_flight(&self, binding: &HookBinding, guest: &str) -> InFlight {
        let gauge = self
            .metrics
            .guest_calls_in_flight
            .get_or_create(&GuestLabels {
                resource: self.resource.clone(),
                guest: guest.to_owned(),
                hook: binding.hook.interface().to_owned(),
            })
            .clone();
        gauge.inc();
        InFlight(gauge)
    }

    /// Metrics for every call; a log line when the hook's state changes.
    fn record<T>(
        &self,
        binding: &HookBinding,
        guest: &str,
        result: &Result<T, GuestFailure>,
        elapsed: Duration,
    ) {
        let hook = binding.hook;
        let label = match result {
            Ok(_) => "ok",
            Err(failure) => failure.label(),
        };
        self.metrics
            .observe_guest(&self.resource, guest, hook.interface(), label, elapsed);
        let failed = match result {
            Err(failure) if !failure.is_refusal() => Some(failure),
            _ => None,
        };
        let mut failing = self.failing.lock().unwrap_or_else(PoisonError::into_inner);
        match failed {
            Some(error) if failing.insert(hook) => {
                tracing::warn!(resource = %self.resource, guest, %hook, %error, on_error = %binding.on_error, "guest hook failing");
            }
            Some(error) => {
                tracing::debug!(resource = %self.resource, guest, %hook, %error, "guest hook still failing");
            }
            None if failing.remove(&hook) => {
                tracing::info!(resource = %self.resource, guest, %hook, "guest hook recovered");
            }
            None => {}
        }
    }
}

/// Keeps a call counted in `guest_calls_in_flight` while it lives.
struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Whether a call may run on the calling thread: the guest cannot block
/// in a host import, and the runtime has other workers to take over
/// (`block_in_place` needs the multi-thread runtime).
fn runs_in_place(guest: &Guest) -> bool {
    !guest.may_block_in_host()
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
}

/// The message of a caught panic.
fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

fn invoke<T>(
    guest: &Guest,
    hook: Hook,
    ctx: &CallContext,
    call: impl FnOnce(&Guest, &CallContext) -> Result<T, CallError>,
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, GuestFailure> {
    let answer = call(guest, ctx).map_err(GuestFailure::Call)?;
    check(&answer).map_err(|problem| GuestFailure::Invalid {
        guest: guest.name().to_owned(),
        hook,
        problem,
    })?;
    Ok(answer)
}
