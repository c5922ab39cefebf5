//! The sandboxed runtime for wasm-device-plugin policy guests.
//!
//! Per-device policy (which devices to advertise, whether they are healthy,
//! which to hand out together, what a container receives, what to check
//! before it starts) runs as WebAssembly components written against the
//! WIT package `wasm-device-plugin:policy@0.1.1` (`wit/policy.wit`). This
//! crate hosts them: one [`PolicyEngine`] (a wasmtime engine with the
//! component model, epoch interruption and the pooling allocator, plus an
//! epoch ticker thread) loads guests with [`PolicyEngine::load_file`] —
//! compiled once per content hash, their exports checked against the five
//! hooks of a compatible WIT version, their imports against what the host
//! provides, pre-linked once — and every hook call on a [`Guest`] runs
//! under a deadline and a memory cap ([`CallLimits`]), in a fresh store or,
//! when the caller names the device-set generation
//! ([`CallContext::generation`]), in an instance kept warm from an earlier
//! call of the same guest and generation. A trap, a timeout, an
//! out-of-memory or a guest's `Err` fails that call only, as a
//! [`CallError`] naming the guest and the hook; a trap, timeout or
//! out-of-memory also throws the instance away.
//!
//! Guests get the `host` and `hardware` imports (served by the caller's
//! [`HostServices`]), the `claim` import (the DRA claim of a prepare call,
//! [`CallContext::claim`], added in WIT 0.1.1) and the WASI p2 imports
//! their toolchains add, served
//! from an empty context: no files, no environment, no arguments, no
//! network, clocks frozen at zero, stdin closed, stdout discarded, stderr
//! kept (bounded) only to explain a trap. Blocking WASI calls (sleeping,
//! waiting on a pollable) trap, since an epoch deadline cannot interrupt a
//! blocked host thread.
//!
//! The data types in [`types`] mirror the WIT records one to one; the host
//! never handles generated binding types.
//!
//! Calls are synchronous: from async code run them in
//! `tokio::task::spawn_blocking`, or, for a guest that cannot block in a
//! host import ([`Guest::may_block_in_host`]), in
//! `tokio::task::block_in_place` on a multi-thread runtime.

#![warn(missing_docs)]

mod bindings;
mod call_failure;
mod claim;
mod engine;
pub mod error;
mod guest;
mod hook;
mod host;
mod indexed;
mod precompiled;
mod regular_file;
mod ticker;
mod trim;
pub mod types;
mod warm;

use std::sync::Arc;
use std::time::Duration;

pub use claim::ClaimInfo;
pub use engine::{
    CacheStats, DEFAULT_UNUSED_CACHE_BYTES, EngineSettings, MAX_GUEST_FILE_BYTES, PolicyEngine,
    guest_file_hash,
};
pub use error::{CallError, CallErrorKind, LoadError, PolicyError};
pub use guest::Guest;
pub use hook::{Hook, UnknownHook};
pub use indexed::PreferredAnswer;
pub use regular_file::{RegularFileError, read_regular_file};
pub use trim::{release_free_memory, release_unused_code_pages};
pub use types::{
    Candidate, CandidateKind, ContainerResponse, Device, DeviceFacts, DeviceNode, DeviceRef,
    DeviceSpec, Mount, NodeType, PreferredRequest, Verdict,
};

/// The WIT package version this host implements (guests built against any
/// `0.1.x` load).
pub const WIT_VERSION: &str = "0.1.1";

/// Limits of one hook call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLimits {
    /// Wall-clock deadline of the call, instantiation included (enforced
    /// with the engine's epoch tick as granularity).
    pub timeout: Duration,
    /// Memory cap of the guest's instance, in bytes (clamped to
    /// [`EngineSettings::max_memory_bytes`]).
    pub memory_bytes: u64,
}

impl Default for CallLimits {
    /// 1 s and 64 MiB.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(1),
            memory_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What the host gives a guest during one call; the `hardware` imports
/// delegate here.
pub trait HostServices: Send + Sync {
    /// `hardware.candidates`: the candidates the resource's selectors
    /// matched, freshly read.
    fn candidates(&self) -> Vec<Candidate>;
    /// `hardware.read-attribute`: a sysfs attribute beneath a candidate.
    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String>;
    /// `hardware.write-attribute`: refused unless granted by config.
    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String>;
}

/// [`HostServices`] with no hardware at all: no candidates, every read and
/// write refused. Handy for smoke tests and `check` runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHardware;

impl HostServices for NoHardware {
    fn candidates(&self) -> Vec<Candidate> {
        Vec::new()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        Err(format!("no hardware: cannot read {name} of {candidate_id}"))
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, _value: &str) -> Result<(), String> {
        Err(format!(
            "no hardware: cannot write {name} of {candidate_id}"
        ))
    }
}

/// Everything one call needs besides its input.
#[derive(Clone)]
pub struct CallContext {
    /// Deadline and memory cap.
    pub limits: CallLimits,
    /// Serves the `hardware` imports.
    pub services: Arc<dyn HostServices>,
    /// What `host.config` returns: the resource's `[guest-config]` table,
    /// values rendered as strings.
    pub config: Arc<Vec<(String, String)>>,
    /// The resource name, for log lines.
    pub resource: String,
    /// The generation of the device set the call belongs to (any number
    /// that changes whenever the devices change). When set, the call may
    /// run in an instance kept warm from an earlier call of the same
    /// [`Guest`] with the same generation (see
    /// [`EngineSettings::warm_instances`]), and the device table of
    /// [`Guest::choose_by_index`] is sent once per generation. `None`: a
    /// fresh instance, thrown away after the call.
    pub generation: Option<u64>,
    /// What the `claim` import returns: the DRA claim an `allocate` or
    /// `pre-start` call serves; `None` for device-plugin calls.
    pub claim: Option<Arc<ClaimInfo>>,
}

impl CallContext {
    /// A context with `limits`, no hardware, no config, no resource and no
    /// generation (a fresh instance per call).
    pub fn new(limits: CallLimits) -> Self {
        Self {
            limits,
            services: Arc::new(NoHardware),
            config: Arc::new(Vec::new()),
            resource: String::new(),
            generation: None,
            claim: None,
        }
    }

    /// The same context serving `claim` (see [`CallContext::claim`]).
    #[must_use]
    pub fn with_claim(mut self, claim: Arc<ClaimInfo>) -> Self {
        self.claim = Some(claim);
        self
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("limits", &self.limits)
            .field("config", &self.config)
            .field("resource", &self.resource)
            .field("generation", &self.generation)
            .field("claim", &self.claim)
            .finish_non_exhaustive()
    }
}

/// One finished hook call, as told to a [`CallObserver`].
#[derive(Clone, Copy, Debug)]
pub struct CallEvent<'a> {
    /// Guest name.
    pub guest: &'a str,
    /// The hook called.
    pub hook: Hook,
    /// [`CallContext::resource`].
    pub resource: &'a str,
    /// Wall time of the call, instantiation included.
    pub duration: Duration,
    /// `None` on success.
    pub error: Option<CallErrorKind>,
}

/// Told about every finished call (wire it to metrics); set in
/// [`EngineSettings::observer`]. Must be cheap: it runs on the calling
/// thread.
pub trait CallObserver: Send + Sync {
    /// One call finished.
    fn call_finished(&self, event: &CallEvent<'_>);
}

impl<F> CallObserver for F
where
    F: Fn(&CallEvent<'_>) + Send + Sync,
{
    fn call_finished(&self, event: &CallEvent<'_>) {
        self(event)
    }
}
