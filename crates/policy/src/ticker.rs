//! The epoch ticker: advances the engine's epoch, the clock every call
//! deadline is counted in, once a tick — but only while at least one piece
//! of guest code may run (a call, or the type check of a load). An idle
//! host has no guest running and no deadline to enforce, so the ticker
//! thread sleeps without waking until the next call begins.
//!
//! Deadlines stay as strict as with a clock that never stops: a store's
//! deadline is counted from the epoch when it is set, which is after
//! [`Ticker::busy`] has started the ticking, and ticks then come every
//! `tick` or later (never sooner: a call starting while another runs does
//! not shift the schedule, and a late tick does not hurry the next), so a
//! guest that loops is interrupted no earlier than its timeout, and on an
//! unloaded machine at most two ticks after it.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wasmtime::Engine;

use crate::error::PolicyError;

/// What the ticker thread and the callers share.
struct Demand {
    state: Mutex<DemandState>,
    /// Signalled when the first call begins and when the ticker must stop.
    wake: Condvar,
}

#[derive(Default)]
struct DemandState {
    /// Guest calls (and load-time checks) running now.
    running: usize,
    /// Set when the ticker is dropped.
    stop: bool,
    /// Epoch increments so far.
    ticks: u64,
    /// Whether the thread is waiting for a call (not ticking).
    parked: bool,
}

impl Demand {
    fn lock(&self) -> MutexGuard<'_, DemandState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Advances an engine's epoch every tick while guest code may run, on a
/// thread of its own; stops the thread when dropped.
pub(crate) struct Ticker {
    demand: Arc<Demand>,
    thread: Option<JoinHandle<()>>,
}

/// Keeps the epoch advancing while it lives: hold one around anything that
/// may run guest code under an epoch deadline.
pub(crate) struct Busy<'a> {
    demand: &'a Demand,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        let mut state = self.demand.lock();
        state.running = state.running.saturating_sub(1);
        // The thread notices at its next tick and parks then.
    }
}

impl Ticker {
    /// Starts the (parked) ticker thread for `engine`.
    pub(crate) fn start(engine: Engine, tick: Duration) -> Result<Self, PolicyError> {
        let demand = Arc::new(Demand {
            state: Mutex::new(DemandState::default()),
            wake: Condvar::new(),
        });
        let shared = Arc::clone(&demand);
        let thread = std::thread::Builder::new()
            .name("wdp-policy-epoch".into())
            .spawn(move || tick_while_busy(&engine, &shared, tick))
            .map_err(PolicyError::Ticker)?;
        Ok(Self {
            demand,
            thread: Some(thread),
        })
    }

    /// Marks guest code as running until the returned guard is dropped;
    /// wakes the thread when it is parked (a call right after another
    /// finds it still ticking, and costs no wake-up).
    pub(crate) fn busy(&self) -> Busy<'_> {
        let mut state = self.demand.lock();
        state.running += 1;
        if state.parked {
            self.demand.wake.notify_all();
        }
        Busy {
            demand: &self.demand,
        }
    }

    /// Epoch increments so far.
    #[cfg(test)]
    fn ticks(&self) -> u64 {
        self.demand.lock().ticks
    }

    /// Whether the thread waits for a call without ticking.
    #[cfg(test)]
    fn parked(&self) -> bool {
        self.demand.lock().parked
    }
}

/// The thread: parked while nothing runs, one increment per `tick` while
/// anything does, until stopped.
fn tick_while_busy(engine: &Engine, demand: &Demand, tick: Duration) {
    let mut state = demand.lock();
    loop {
        if state.stop {
            return;
        }
        if state.running == 0 {
            state.parked = true;
            state = demand
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.parked = false;
            continue;
        }
        // Each tick comes a full `tick` after the one before it actually
        // came: a wake-up before the next tick is due (a call starting, a
        // spurious one) never advances the epoch early, and a tick that
        // came late (a thread descheduled under load) never makes the
        // next one come sooner. Deadlines may run late, never early.
        let mut next = Instant::now() + tick;
        while !state.stop && state.running > 0 {
            let now = Instant::now();
            if now >= next {
                engine.increment_epoch();
                state.ticks += 1;
                next = now + tick;
                continue;
            }
            state = demand
                .wake
                .wait_timeout(state, next - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.demand.lock().stop = true;
        self.demand.wake.notify_all();
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
#[path = "ticker_tests.rs"]
mod tests;
