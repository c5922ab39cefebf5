//! Warm instances: a guest's instance kept between calls of one device-set
//! generation, so a call skips instantiation (and the page faults of a
//! fresh linear memory) and a device table is sent once per generation.
//!
//! Isolation rules, which `docs/guest-guide.md` states to guest authors:
//! an instance is only ever reused by the same loaded [`crate::Guest`]
//! (one resource's binding of one build; a reload loads a new one), for the
//! same generation, by one call at a time. It is thrown away after a trap,
//! a timeout or a memory-cap hit (anything but a clean answer or the
//! guest's own `Err`), when it no longer fits the next call's memory cap,
//! when it grew its memory by more than [`MAX_GROWTH_BYTES`] since its first
//! call, and after [`MAX_CALLS`] calls.

use std::sync::{Arc, Mutex, PoisonError};

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, ComponentNamedList, Instance, Lift, Lower};

use crate::call_failure::classify;
use crate::error::CallError;
use crate::guest::{Guest, MAX_GUEST_MESSAGE, new_store};
use crate::host::{CallInfo, CallState};
use crate::{CallContext, CallLimits, Hook};

/// How many calls one warm instance serves at most.
pub(crate) const MAX_CALLS: u32 = 10_000;
/// How far a warm instance's memory may grow past its size after its first
/// call before it is recycled (a guest with a never-freeing allocator
/// grows with every call).
pub(crate) const MAX_GROWTH_BYTES: usize = 4 * 1024 * 1024;
/// How many idle warm instances one guest keeps.
const MAX_IDLE: usize = 2;

/// One instance and its store, with what the host knows about its state.
pub(crate) struct WarmInstance {
    pub(crate) store: Store<CallState>,
    pub(crate) instance: Instance,
    /// The generation it serves; `None` for a throwaway instance.
    pub(crate) generation: Option<u64>,
    /// The generation of the device table it holds, if any.
    pub(crate) table_generation: Option<u64>,
    /// Calls it has served.
    pub(crate) calls: u32,
    /// Its memory after its first call.
    pub(crate) baseline_bytes: Option<usize>,
}

impl WarmInstance {
    /// Whether it may serve another call after a clean one.
    fn reusable(&mut self) -> bool {
        self.calls = self.calls.saturating_add(1);
        let held = self.store.data().limiter.held_bytes;
        let baseline = *self.baseline_bytes.get_or_insert(held);
        self.generation.is_some()
            && self.store.data().limiter.exceeded.is_none()
            && self.calls < MAX_CALLS
            && held <= baseline.saturating_add(MAX_GROWTH_BYTES)
    }
}

/// The idle warm instances of one guest.
#[derive(Default)]
pub(crate) struct WarmPool {
    idle: Mutex<Vec<WarmInstance>>,
}

impl WarmPool {
    /// An idle instance of `generation`, if one is kept. Instances of other
    /// generations are dropped (outside the lock).
    pub(crate) fn take(&self, generation: u64) -> Option<WarmInstance> {
        let stale;
        let found;
        {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            let (same, other): (Vec<_>, Vec<_>) = std::mem::take(&mut *idle)
                .into_iter()
                .partition(|w| w.generation == Some(generation));
            stale = other;
            let mut same = same;
            found = same.pop();
            *idle = same;
        }
        drop(stale);
        found
    }

    /// Keeps `instance` for a later call after a clean call, or drops it.
    pub(crate) fn give_back(&self, mut instance: WarmInstance) {
        if !instance.reusable() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(instance);
            return;
        }
        drop(idle);
        drop(instance);
    }
}

/// The instance side of every call.
impl Guest {
    /// The call's limits, the memory cap clamped to the engine's.
    pub(crate) fn limits(&self, ctx: &CallContext) -> CallLimits {
        CallLimits {
            timeout: ctx.limits.timeout,
            memory_bytes: ctx.limits.memory_bytes.min(self.shared.max_memory_bytes),
        }
    }

    /// A warm instance of the call's generation readied for this call, or
    /// a fresh one.
    pub(crate) fn acquire(
        &self,
        ctx: &CallContext,
        hook: Hook,
        limits: CallLimits,
    ) -> Result<WarmInstance, CallError> {
        let info = || CallInfo {
            guest: Arc::clone(&self.guest),
            hook: Some(hook),
            resource: ctx.resource.clone(),
            services: Arc::clone(&ctx.services),
            config: Arc::clone(&ctx.config),
            claim: ctx.claim.clone(),
        };
        let generation = ctx.generation.filter(|_| self.shared.warm_instances);
        if let Some(generation) = generation
            && let Some(mut warm) = self.warm.take(generation)
            && warm.store.data().limiter.fits(limits.memory_bytes)
        {
            warm.store.data_mut().rearm(info(), limits.memory_bytes);
            warm.store
                .set_epoch_deadline(self.shared.deadline_ticks(limits.timeout));
            return Ok(warm);
        }
        let mut store = new_store(&self.shared, info(), limits);
        let instance = match self.prepared.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(error) => return Err(classify(&self.name, hook, limits, &store, error, true)),
        };
        Ok(WarmInstance {
            store,
            instance,
            generation,
            table_generation: None,
            calls: 0,
            baseline_bytes: None,
        })
    }

    /// Keeps `instance` warm after a clean call or the guest's own `Err`;
    /// drops it after anything else (trap, timeout, memory cap).
    pub(crate) fn release<T>(&self, instance: WarmInstance, result: &Result<T, CallError>) {
        match result {
            Ok(_) | Err(CallError::GuestError { .. }) => self.warm.give_back(instance),
            Err(_) => drop(instance),
        }
    }

    /// Calls one export function of `instance`: `Ok` with the guest's
    /// answer, its `Err` as [`CallError::GuestError`], a wasmtime failure
    /// classified.
    pub(crate) fn call_export<P, T>(
        &self,
        instance: &mut WarmInstance,
        hook: Hook,
        limits: CallLimits,
        func: &ComponentExportIndex,
        params: P,
    ) -> Result<T, CallError>
    where
        P: ComponentNamedList + Lower,
        T: Lift + 'static,
        (Result<T, String>,): ComponentNamedList + Lift,
    {
        let store = &mut instance.store;
        let func = instance
            .instance
            .get_typed_func::<P, (Result<T, String>,)>(&mut *store, func)
            .map_err(|e| CallError::Instantiate {
                guest: self.name.clone(),
                hook,
                detail: format!("{e:#}"),
            })?;
        match func.call(&mut *store, params) {
            Ok((Ok(value),)) => Ok(value),
            Ok((Err(message),)) => Err(self.guest_error(hook, message)),
            Err(error) => Err(classify(&self.name, hook, limits, store, error, false)),
        }
    }

    /// The guest's own `Err`, its message bounded.
    pub(crate) fn guest_error(&self, hook: Hook, mut message: String) -> CallError {
        if message.len() > MAX_GUEST_MESSAGE {
            let mut end = MAX_GUEST_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("...");
        }
        CallError::GuestError {
            guest: self.name.clone(),
            hook,
            message,
        }
    }
}
