//! The built-in policy of each hook: what a resource does where no guest
//! implements the hook, and what `on-error = "builtin"` falls back to.

use std::collections::{BTreeMap, BTreeSet};

use wdp_hardware::Candidate;
use wdp_policy::types::{ContainerResponse, Device, DeviceNode, DeviceSpec, Verdict};

use crate::device_set::AdvertisedDevice;

/// Discovery: every candidate is one device with its selector's replica
/// count (`replicas[i]` for `candidates[i]`).
pub fn discovery(candidates: &[Candidate], replicas: &[u32]) -> Vec<Device> {
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
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            replicas: (*replicas).max(1),
        })
        .collect()
}

/// Health: healthy while every candidate of the device is present.
pub fn verdict(device: &Device, present: impl Fn(&str) -> bool) -> Verdict {
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

/// Preferred allocation: the must-include IDs, then devices on the NUMA
/// nodes already chosen (or the node with the most free devices), ties by
/// ID.
pub fn preferred(
    available: &[&AdvertisedDevice],
    must_include: &[String],
    size: usize,
) -> Vec<String> {
    let mut chosen: Vec<String> = must_include.to_vec();
    let mut numa: BTreeSet<i64> = available
        .iter()
        .filter(|d| must_include.iter().any(|m| m == d.id()))
        .flat_map(|d| d.device.numa_nodes.iter().copied())
        .collect();
    if numa.is_empty() {
        let mut per_node: BTreeMap<i64, usize> = BTreeMap::new();
        for d in available {
            for n in &d.device.numa_nodes {
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
    let mut rest: Vec<&&AdvertisedDevice> = available
        .iter()
        .filter(|d| !chosen.iter().any(|c| c == d.id()))
        .collect();
    rest.sort_by_key(|d| {
        let numa_nodes = &d.device.numa_nodes;
        let local = numa_nodes.is_empty() || numa_nodes.iter().any(|n| numa.contains(n));
        (!local, d.id())
    });
    for d in rest {
        if chosen.len() >= size {
            break;
        }
        chosen.push(d.id().to_owned());
    }
    chosen
}

/// Allocate: one device spec per distinct device node of the devices, then
/// per companion node, at the same path in the container, with the
/// resource's cgroup permissions.
pub fn allocate(
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
mod tests {
    use super::*;
    use crate::validate::preferred as validate_preferred;
    use wdp_policy::types::DeviceRef;

    fn device(id: &str, numa: &[i64]) -> AdvertisedDevice {
        AdvertisedDevice {
            device: DeviceRef {
                id: id.into(),
                device_id: id.into(),
                numa_nodes: numa.to_vec(),
                ..DeviceRef::default()
            },
            healthy: true,
            reason: String::new(),
            candidates: vec![],
        }
    }

    #[test]
    fn preferred_keeps_must_include_and_packs_numa() {
        let devs = [
            device("a", &[0]),
            device("b", &[1]),
            device("c", &[1]),
            device("d", &[0]),
        ];
        let refs: Vec<&AdvertisedDevice> = devs.iter().collect();
        let answer = preferred(&refs, &["b".to_owned()], 2);
        assert_eq!(answer, ["b", "c"]);
        let ids: Vec<String> = devs.iter().map(|d| d.id().to_owned()).collect();
        validate_preferred(&answer, &ids, &["b".to_owned()], 2).unwrap();
    }

    #[test]
    fn gone_candidates_make_a_device_unhealthy() {
        let d = Device {
            id: "gpu".into(),
            candidates: vec!["0000:01:00.0".into()],
            ..Device::default()
        };
        let v = verdict(&d, |_| false);
        assert!(!v.healthy);
        assert!(v.reason.contains("0000:01:00.0"), "{}", v.reason);
        assert!(verdict(&d, |id| id == "0000:01:00.0").healthy);
    }
}
