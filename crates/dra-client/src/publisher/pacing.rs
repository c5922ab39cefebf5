//! When the publisher's next pass may start: the write budget of a pool.
//!
//! Two rules, both measured from when a pass starts:
//!
//! - **At most one pass per write interval** (`publish-interval-ms`, default
//!   [`DEFAULT_MIN_WRITE_INTERVAL`]). The first change after a quiet interval
//!   is written at once (leading edge); changes during the interval are
//!   coalesced and the newest is written when it ends (trailing edge), so
//!   a pool makes at most `60 s / interval` passes a minute whatever the
//!   device churn, and the newest state always lands.
//! - **After a failure, not before the backoff.** The base delay is 100 ms,
//!   doubling per consecutive failure up to 30 s; the API server's
//!   `Retry-After` (429, 5xx), capped at [`MAX_RETRY_AFTER`], replaces a
//!   shorter base. The wait is the base plus a random 0–50 % (jitter), so
//!   thousands of nodes refused at once do not come back at once. A success
//!   resets the backoff.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use tokio::time::Instant;

pub use crate::plan::DEFAULT_MIN_WRITE_INTERVAL;
/// The first retry delay after a failed pass (before jitter).
pub(crate) const FIRST_RETRY_DELAY: Duration = Duration::from_millis(100);
/// The longest retry delay the doubling reaches (before jitter).
pub(crate) const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);
/// The longest `Retry-After` obeyed; a longer one waits this long.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(600);

/// The pacing state of one pool.
#[derive(Debug)]
pub(crate) struct Pacing {
    interval: Duration,
    last_start: Option<Instant>,
    next_delay: Duration,
    retry_at: Option<Instant>,
}

impl Pacing {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            last_start: None,
            next_delay: FIRST_RETRY_DELAY,
            retry_at: None,
        }
    }

    /// Changes the write interval; it applies from the last pass's start.
    pub(crate) fn set_interval(&mut self, interval: Duration) {
        self.interval = interval;
    }

    /// The earliest instant the next pass may start (`None`: now).
    pub(crate) fn earliest(&self) -> Option<Instant> {
        let after_interval = self.last_start.map(|start| start + self.interval);
        after_interval.max(self.retry_at)
    }

    /// Whether a pass may start at `now`.
    pub(crate) fn allows(&self, now: Instant) -> bool {
        self.earliest().is_none_or(|earliest| earliest <= now)
    }

    /// A pass starts at `now`.
    pub(crate) fn started(&mut self, now: Instant) {
        self.last_start = Some(now);
        self.retry_at = None;
    }

    /// The pass succeeded: the backoff starts over.
    pub(crate) fn succeeded(&mut self) {
        self.next_delay = FIRST_RETRY_DELAY;
    }

    /// The pass failed at `now`, the server asking for `retry_after` (if it
    /// did); returns how long the next pass waits.
    pub(crate) fn failed(&mut self, now: Instant, retry_after: Option<Duration>) -> Duration {
        let base = retry_after
            .map(|asked| asked.min(MAX_RETRY_AFTER))
            .unwrap_or_default()
            .max(self.next_delay);
        let wait = with_jitter(base, random_fraction());
        self.retry_at = Some(now + wait);
        self.next_delay = (self.next_delay * 2).min(MAX_RETRY_DELAY);
        wait
    }
}

/// `base` plus `fraction` (in `[0, 1)`) of half of it.
fn with_jitter(base: Duration, fraction: f64) -> Duration {
    base + base.mul_f64(fraction.clamp(0.0, 1.0) / 2.0)
}

/// A fraction in `[0, 1)` from the process's random hash keys (SipHash with
/// fresh random keys per `RandomState`): enough to spread retries.
fn random_fraction() -> f64 {
    let bits = RandomState::new().hash_one(std::process::id());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
#[path = "pacing_tests.rs"]
mod tests;
