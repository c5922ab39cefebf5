//! What the engine and every guest loaded from it share ([`Shared`]): the
//! wasmtime engine, the shared linker, the epoch ticker, the limits every
//! call is clamped to, the call observer and the precompiled-guest
//! directory; and how a call's store is made under them.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use crate::call_state::{CallInfo, CallState};
use crate::context::CallLimits;
use crate::error::LoadError;
use crate::observer::CallObserver;
use crate::precompiled::PrecompiledDir;
use crate::ticker::{Busy, Ticker};

/// State shared by the engine and every guest loaded from it. The epoch
/// ticker (which ticks only while guest code runs) stops when the last of
/// them is dropped.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) linker: Linker<CallState>,
    pub(crate) epoch_tick: Duration,
    pub(crate) max_memory_bytes: u64,
    pub(crate) load_limits: CallLimits,
    pub(crate) observer: Option<Arc<dyn CallObserver>>,
    pub(crate) pooling: bool,
    pub(crate) warm_instances: bool,
    pub(crate) precompiled: Option<PrecompiledDir>,
    pub(crate) ticker: Ticker,
}

impl Shared {
    /// Keeps the epoch advancing until the guard is dropped: held around
    /// every piece of guest code that runs under a deadline.
    pub(crate) fn busy(&self) -> Busy<'_> {
        self.ticker.busy()
    }

    /// Deadline in epoch ticks for a timeout: rounded up, plus one tick
    /// because the next tick may come right after the deadline is set.
    pub(crate) fn deadline_ticks(&self, timeout: Duration) -> u64 {
        let tick = self.epoch_tick.as_nanos().max(1);
        let ticks = timeout.as_nanos().div_ceil(tick);
        u64::try_from(ticks)
            .unwrap_or(u64::MAX / 2)
            .saturating_add(1)
    }

    /// The guest `name` with content hash `hash` and bytes `bytes`,
    /// compiled: mapped from the precompiled directory when it holds this
    /// build, otherwise compiled (and written there).
    pub(crate) fn compile(
        &self,
        name: &str,
        hash: &str,
        bytes: &[u8],
    ) -> Result<Component, LoadError> {
        if let Some(component) = self
            .precompiled
            .as_ref()
            .and_then(|dir| dir.load(&self.engine, hash))
        {
            return Ok(component);
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| LoadError::Compile {
            guest: name.to_string(),
            detail: format!("{e:#}"),
        })?;
        if let Some(dir) = &self.precompiled {
            dir.store(&component, hash);
        }
        Ok(component)
    }

    /// A store for one call of a guest: `info` for its imports and log
    /// lines, `limits` (the memory cap clamped to the engine's) enforced.
    pub(crate) fn new_store(&self, info: CallInfo, limits: CallLimits) -> Store<CallState> {
        let memory = limits.memory_bytes.min(self.max_memory_bytes);
        let mut store = Store::new(&self.engine, CallState::new(info, memory));
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(self.deadline_ticks(limits.timeout));
        store.epoch_deadline_trap();
        store
    }
}
