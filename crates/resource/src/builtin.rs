//! The built-in policy of each hook: what a resource does where no guest
//! implements the hook, and what `on-error = "builtin"` falls back to.

use std::collections::{BTreeMap, BTreeSet};

use wdp_hardware::Candidate;
use wdp_policy::types::{ContainerResponse, Device, DeviceNode, DeviceSpec, Verdict};

use crate::device_set::AdvertisedDevice;

/// Discovery: every candidate is one device with its selector's replica
/// count (`replicas[i]` for `candidates[i]`).
pub(crate) fn discovery(candidates: &[Candidate], replicas: &[u32]) -> Vec<Device> {
    candidates
        .iter()
        .zip(replicas)
        .map(|(c, replicas)| Device {
            id: c.id.clone(),
            candidates: vec![c.id.clone()],
            numa_nodes: c.numa_nodes.clone(),
            attributes: c
                .attributes
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            replicas: (*replicas).max(1),
        })
        .collect()
}

/// Health: healthy while every candidate of the device is present.
pub(crate) fn verdict(device: &Device, present: impl Fn(&str) -> bool) -> Verdict {
    let missing: Vec<&str> = device
        .candidates
        .iter()
        .filter(|c| !present(c))
        .map(String::as_str)
        .collect();
    Verdict {
        id: device.id.clone(),
        healthy: missing.is_empty(),
        reason: if missing.is_empty() {
            String::new()
        } else {
            format!("hardware gone: {}", missing.join(", "))
        },
    }
}

/// Whether the built-in preferred allocation can choose better than any
/// other pick among these candidates: only when they lie on more than one
/// NUMA node (it packs onto one).
pub(crate) fn packing_helps(candidates: &[Candidate]) -> bool {
    let mut nodes = candidates.iter().flat_map(|c| c.numa_nodes.iter());
    nodes
        .next()
        .is_some_and(|first| nodes.any(|other| other != first))
}

/// Preferred allocation: the must-include devices, then devices on the
/// NUMA nodes already chosen (or the node with the most free devices),
/// ties by ID. Works on positions in `devices` (a device set's devices, in
/// ID order): `available` and `must_include` in, positions out, so no ID
/// is compared or copied.
pub(crate) fn preferred(
    devices: &[AdvertisedDevice],
    available: &[u32],
    must_include: &[u32],
    size: usize,
) -> Vec<u32> {
    let numa_of = |i: u32| devices[i as usize].device.numa_nodes.as_slice();
    let mut chosen: Vec<u32> = must_include.to_vec();
    let mut numa: BTreeSet<i64> = must_include
        .iter()
        .flat_map(|&i| numa_of(i).iter().copied())
        .collect();
    if numa.is_empty() {
        let mut per_node: BTreeMap<i64, usize> = BTreeMap::new();
        for &i in available {
            for n in numa_of(i) {
                *per_node.entry(*n).or_default() += 1;
            }
        }
        if let Some((&node, _)) = per_node
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        {
            numa.insert(node);
        }
    }
    let mut taken = vec![false; devices.len()];
    for &i in must_include {
        taken[i as usize] = true;
    }
    // (remote, position): local devices first, then ID order.
    let mut rest: Vec<(bool, u32)> = available
        .iter()
        .filter(|&&i| !taken[i as usize])
        .map(|&i| {
            let nodes = numa_of(i);
            let local = nodes.is_empty() || nodes.iter().any(|n| numa.contains(n));
            (!local, i)
        })
        .collect();
    rest.sort_unstable();
    let wanted = size.saturating_sub(chosen.len());
    chosen.extend(rest.iter().take(wanted).map(|&(_, i)| i));
    chosen
}

/// Allocate: one device spec per distinct device node of the devices, then
/// per companion node, at the same path in the container, with the
/// resource's cgroup permissions.
pub(crate) fn allocate(
    devices: &[&AdvertisedDevice],
    companions: &[DeviceNode],
    permissions: &str,
) -> ContainerResponse {
    let mut seen = BTreeSet::new();
    let mut specs = Vec::new();
    let nodes = devices.iter().flat_map(|d| d.device.nodes.iter());
    for node in nodes.chain(companions) {
        if seen.insert(node.path.as_str()) {
            specs.push(DeviceSpec {
                container_path: node.path.clone(),
                host_path: node.path.clone(),
                permissions: permissions.to_owned(),
            });
        }
    }
    ContainerResponse {
        devices: specs,
        ..ContainerResponse::default()
    }
}

#[cfg(test)]
#[path = "builtin_tests.rs"]
mod tests;
