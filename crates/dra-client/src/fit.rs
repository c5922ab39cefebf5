//! What one ResourceSlice of a 1.34 API server cannot hold.
//!
//! There a counter set travels in the slice of the devices consuming it, so
//! each group of counter sets tied together by consumption (see
//! [`crate::pool`]) must fit one slice with its consumers: at most 32
//! counters in its sets, at most 128 devices (64 when one is tainted) and
//! 1024 consumed counters. A group whose sets hold too many counters is left
//! out with its consumers; a group with too many consumers keeps those that
//! fit, in name order. 1.35 servers put counter sets in slices of their own,
//! where the planner cuts anything into slices that fit.

use std::collections::BTreeSet;

use crate::pool::{PoolContent, counter_groups};
use crate::problem::DeviceProblem;
use crate::version::ServerVersion;

/// Leaves out of `content` what cannot be laid out on a server of `version`
/// and returns why, one problem per counter set or device left out.
pub(crate) fn check_fit(content: &mut PoolContent, version: ServerVersion) -> Vec<DeviceProblem> {
    let limits = version.limits();
    let mut problems = Vec::new();
    let mut dropped_sets = BTreeSet::new();
    let mut dropped_devices = BTreeSet::new();
    for group in counter_groups(content) {
        let names: Vec<String> = group
            .sets
            .iter()
            .map(|&index| format!("{:?}", content.counter_sets[index].name))
            .collect();
        let names = names.join(", ");
        let counters: usize = group
            .sets
            .iter()
            .map(|&index| content.counter_sets[index].counters.len())
            .sum();
        if let Some(max) = limits.max_counters_per_slice
            && counters > max
        {
            let why = format!(
                "the counter sets {names} are consumed together and hold {counters} counters, more than the {max} one slice of a {version} server holds"
            );
            for &index in &group.sets {
                problems.push(DeviceProblem::of_counter_set(
                    &content.counter_sets[index].name,
                    "",
                    format!("{why}; left out"),
                ));
                dropped_sets.insert(index);
            }
            for &index in &group.devices {
                problems.push(DeviceProblem::of_device(
                    &content.devices[index].name,
                    "consumesCounters".to_owned(),
                    format!("{why}; left out with them"),
                ));
                dropped_devices.insert(index);
            }
            continue;
        }
        let tainted = group
            .devices
            .iter()
            .any(|&index| !content.devices[index].taints.is_empty());
        let max_devices = limits.device_limit(tainted, true);
        let max_consumed = limits.max_consumed_counters_per_slice.unwrap_or(usize::MAX);
        let (mut devices, mut consumed) = (0, 0);
        for &index in &group.devices {
            let device = &content.devices[index];
            let own: usize = device
                .consumes_counters
                .iter()
                .map(|c| c.counters.len())
                .sum();
            if devices < max_devices && consumed + own <= max_consumed {
                devices += 1;
                consumed += own;
                continue;
            }
            problems.push(DeviceProblem::of_device(
                &device.name,
                "consumesCounters".to_owned(),
                format!(
                    "the devices consuming counter sets {names} must share one slice of a {version} server, which holds at most {max_devices} of them and {max_consumed} consumed counters; left out"
                ),
            ));
            dropped_devices.insert(index);
        }
    }
    let mut index = 0;
    content.devices.retain(|_| {
        index += 1;
        !dropped_devices.contains(&(index - 1))
    });
    let mut index = 0;
    content.counter_sets.retain(|_| {
        index += 1;
        !dropped_sets.contains(&(index - 1))
    });
    problems
}
