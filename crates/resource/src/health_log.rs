//! The log lines of a resource's health changes, rate-limited per device:
//! a device gets at most [`HEALTH_LINES_PER_INTERVAL`] lines (WARN
//! unhealthy with the reason, INFO healthy again) in each
//! [`HEALTH_LINE_INTERVAL`], so a device that fails and recovers is logged
//! as it happens; further changes in the interval are counted instead, and
//! the device's next line (its next change after the interval, or a line
//! at the first refresh after it) says how many were left out and what the
//! device is now. A device flapping every 100 ms costs 4 lines per 10 s
//! instead of ten a second. At most [`HEALTH_CHANGES_LOGGED`] lines a
//! refresh, then one line with the count (a node-wide event can turn
//! thousands at once).
//!
//! This module only decides what to say ([`HealthLine`]); the resource
//! writes the lines to the log.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::device_set::{DeviceSet, HealthChange};

/// The interval over which a device's health lines are counted.
pub(crate) const HEALTH_LINE_INTERVAL: Duration = Duration::from_secs(10);

/// The most health lines one device gets in one [`HEALTH_LINE_INTERVAL`].
pub(crate) const HEALTH_LINES_PER_INTERVAL: u32 = 4;

/// Devices whose health changes are logged one by one in a refresh; more
/// are counted in one line.
pub(crate) const HEALTH_CHANGES_LOGGED: usize = 10;

/// One line to log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HealthLine {
    /// WARN: the device is unhealthy now.
    Unhealthy {
        /// The kubelet ID.
        id: String,
        /// Why, or "no reason given".
        reason: String,
        /// Changes of this device not logged since its last line.
        suppressed: u32,
    },
    /// INFO: the device is healthy now.
    Healthy {
        /// The kubelet ID.
        id: String,
        /// Changes of this device not logged since its last line.
        suppressed: u32,
    },
    /// WARN: more devices changed health than are logged one by one.
    More(usize),
}

impl HealthLine {
    /// The message, as the log shows it.
    pub fn message(&self) -> String {
        let left_out = |n: &u32| match n {
            0 => String::new(),
            1 => " (1 earlier health change of this device not logged)".to_owned(),
            n => format!(" ({n} earlier health changes of this device not logged)"),
        };
        match self {
            HealthLine::Unhealthy {
                id,
                reason,
                suppressed,
            } => format!("device {id} is unhealthy: {reason}{}", left_out(suppressed)),
            HealthLine::Healthy { id, suppressed } => {
                let now = if *suppressed > 0 {
                    "healthy"
                } else {
                    "healthy again"
                };
                format!("device {id} is {now}{}", left_out(suppressed))
            }
            HealthLine::More(count) => format!(
                "{count} more devices changed health (`wasm-device-plugin check` lists every device with its reason)"
            ),
        }
    }
}

/// When each device was last logged, and what was left out since.
#[derive(Debug, Default)]
pub(crate) struct HealthLog {
    devices: HashMap<String, DeviceLog>,
}

#[derive(Debug)]
struct DeviceLog {
    /// When the device's current interval began (its first line in it).
    since: Instant,
    /// Lines logged in the current interval.
    lines: u32,
    /// Changes left out since its last line.
    suppressed: u32,
}

impl DeviceLog {
    fn new(now: Instant) -> Self {
        Self {
            since: now,
            lines: 0,
            suppressed: 0,
        }
    }
}

impl HealthLog {
    /// The lines for the changes from `before` to `after` at `now`.
    pub fn changes(
        &mut self,
        before: &DeviceSet,
        after: &DeviceSet,
        now: Instant,
    ) -> Vec<HealthLine> {
        let mut lines = Vec::new();
        let mut more = 0;
        for change in crate::device_set::health_changes(before, after) {
            let id = match &change {
                HealthChange::Unhealthy { id, .. } | HealthChange::Recovered { id } => *id,
            };
            if lines.len() == HEALTH_CHANGES_LOGGED {
                // Counted in the summary: the next change gets its own line.
                more += 1;
                continue;
            }
            let log = self
                .devices
                .entry(id.to_owned())
                .or_insert_with(|| DeviceLog::new(now));
            if now.duration_since(log.since) >= HEALTH_LINE_INTERVAL {
                log.since = now;
                log.lines = 0;
            }
            if log.lines == HEALTH_LINES_PER_INTERVAL {
                log.suppressed += 1;
                continue;
            }
            log.lines += 1;
            let suppressed = std::mem::take(&mut log.suppressed);
            lines.push(match change {
                HealthChange::Unhealthy { id, reason } => HealthLine::Unhealthy {
                    id: id.to_owned(),
                    reason: non_empty(reason),
                    suppressed,
                },
                HealthChange::Recovered { id } => HealthLine::Healthy {
                    id: id.to_owned(),
                    suppressed,
                },
            });
        }
        if more > 0 {
            lines.push(HealthLine::More(more));
        }
        lines
    }

    /// At any refresh: for each device whose changes were left out and whose
    /// interval has passed, one line saying what it is now in `current`;
    /// forgets devices with nothing left out once their interval passed (so
    /// the log's memory is bounded by the devices that changed lately).
    pub fn catch_up(&mut self, current: &DeviceSet, now: Instant) -> Vec<HealthLine> {
        let mut lines = Vec::new();
        self.devices.retain(|id, log| {
            if now.duration_since(log.since) < HEALTH_LINE_INTERVAL {
                return true;
            }
            if log.suppressed == 0 {
                return false;
            }
            let suppressed = std::mem::take(&mut log.suppressed);
            log.since = now;
            log.lines = 1;
            let device = current.position(id).map(|p| &current.devices()[p]);
            lines.push(match device {
                Some(d) if !d.healthy => HealthLine::Unhealthy {
                    id: id.clone(),
                    reason: non_empty(&d.reason),
                    suppressed,
                },
                _ => HealthLine::Healthy {
                    id: id.clone(),
                    suppressed,
                },
            });
            true
        });
        lines
    }
}

fn non_empty(reason: &str) -> String {
    if reason.is_empty() {
        "no reason given".to_owned()
    } else {
        reason.to_owned()
    }
}

#[cfg(test)]
#[path = "health_log_tests.rs"]
mod tests;
