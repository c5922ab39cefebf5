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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use wasmtime::Store;
use wasmtime::component::Instance;

use crate::call_state::CallState;
use crate::error::CallError;

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

/// How the calls of one loaded guest got their instances, counted since it
/// was loaded ([`crate::Guest::instance_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InstanceStats {
    /// Calls that instantiated the guest afresh.
    pub instantiated: u64,
    /// Calls served by an instance kept warm from an earlier call.
    pub reused: u64,
    /// Instances of a generation thrown away after a call instead of being
    /// kept: after a trap, a timeout or a memory-cap hit, when grown past
    /// the limit or after the most calls one instance serves.
    pub retired: u64,
}

/// The idle warm instances of one guest, and its instance counters.
#[derive(Default)]
pub(crate) struct WarmPool {
    idle: Mutex<Vec<WarmInstance>>,
    instantiated: AtomicU64,
    reused: AtomicU64,
    retired: AtomicU64,
}

impl WarmPool {
    /// An idle instance of `generation` whose memory fits a cap of
    /// `memory_bytes`, if one is kept. Instances of other generations, and
    /// one too large for the cap, are dropped (outside the lock).
    pub(crate) fn take(&self, generation: u64, memory_bytes: u64) -> Option<WarmInstance> {
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
        let found = found.filter(|warm| warm.store.data().limiter.fits(memory_bytes));
        if found.is_some() {
            self.reused.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// Counts a call that instantiated the guest afresh.
    pub(crate) fn count_instantiated(&self) {
        self.instantiated.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> InstanceStats {
        InstanceStats {
            instantiated: self.instantiated.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            retired: self.retired.load(Ordering::Relaxed),
        }
    }

    /// Keeps `instance` for a later call after a clean call or the guest's
    /// own `Err`; drops it after anything else (trap, timeout, memory cap).
    pub(crate) fn release<T>(&self, instance: WarmInstance, result: &Result<T, CallError>) {
        match result {
            Ok(_) | Err(CallError::GuestError { .. }) => self.give_back(instance),
            Err(_) => self.retire(instance),
        }
    }

    /// Drops `instance`, counting it when it served a generation.
    fn retire(&self, instance: WarmInstance) {
        if instance.generation.is_some() {
            self.retired.fetch_add(1, Ordering::Relaxed);
        }
        drop(instance);
    }

    /// Keeps `instance` for a later call after a clean call, or drops it.
    fn give_back(&self, mut instance: WarmInstance) {
        if !instance.reusable() {
            self.retire(instance);
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
