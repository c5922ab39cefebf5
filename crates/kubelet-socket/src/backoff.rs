//! Waiting between attempts that fail: binding a socket, calling the
//! kubelet.
//!
//! Exponential, from 25 ms to at most 5 s, and reset by the caller when
//! whatever it waits for changes (a new `kubelet.sock`, a socket bound), so
//! the first attempts after a kubelet (re)start come quickly.

use std::time::Duration;

/// Exponential backoff between failed attempts.
#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Backoff {
    /// The first wait.
    pub const FIRST: Duration = Duration::from_millis(25);
    /// The longest wait.
    pub const MAX: Duration = Duration::from_secs(5);
    /// Failures retried sooner than this are the normal start-up race
    /// (a kubelet's socket exists before it listens): worth a DEBUG line,
    /// not a WARN.
    pub const QUIET: Duration = Duration::from_millis(400);

    /// A backoff whose next wait is [`Self::FIRST`].
    pub fn new() -> Self {
        Self { next: Self::FIRST }
    }

    /// The wait before the next attempt; each call doubles the one after.
    pub fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        now
    }

    /// The next wait is [`Self::FIRST`] again.
    pub fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
#[path = "backoff_tests.rs"]
mod tests;
