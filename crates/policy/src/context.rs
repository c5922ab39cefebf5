//! What one hook call runs under besides its input: its limits
//! ([`CallLimits`]) and its context ([`CallContext`]: limits, host
//! services, guest config, resource, device-set generation, DRA claim).

use std::sync::Arc;
use std::time::Duration;

use crate::claim::ClaimInfo;
use crate::services::{HostServices, NoHardware};

/// Limits of one hook call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallLimits {
    /// Wall-clock deadline of the call, instantiation included (enforced
    /// with the engine's epoch tick as granularity).
    pub timeout: Duration,
    /// Memory cap of the guest's instance, in bytes (clamped to
    /// [`EngineSettings::max_memory_bytes`](crate::EngineSettings::max_memory_bytes)).
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
    /// [`Guest`](crate::Guest) with the same generation (see
    /// [`EngineSettings::warm_instances`](crate::EngineSettings::warm_instances)),
    /// and the device table of
    /// [`Guest::choose_by_index`](crate::Guest::choose_by_index) is sent
    /// once per generation. `None`: a fresh instance, thrown away after the
    /// call.
    pub generation: Option<u64>,
    /// What the `claim` import returns: the DRA claim a `dra-prepare`,
    /// `dra-unprepare`, `allocate` or `pre-start` call serves (its
    /// [`ClaimInfo::devices`] are what `claim.devices` returns); `None` for
    /// device-plugin calls and outside a prepare (`claim.current` is then
    /// `none`, `claim.devices` empty).
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
