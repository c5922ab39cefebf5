//! `hostile-nonsense`: answers every hook with output the host's validator
//! must refuse.
//!
//! - discovery: duplicate IDs, an empty ID, a 64-character ID, a device made
//!   of an unknown candidate;
//! - health: verdicts for unknown and replica IDs, and a duplicate verdict;
//! - preferred-allocation: one more ID than asked, a duplicate, an unknown
//!   ID, and no must-include ID;
//! - allocate: relative host paths, bad permissions, an empty env name, a
//!   malformed CDI name;
//! - pre-start: an error message of 5 MiB (over the kubelet's 4 MiB limit)
//!   when given devices, ok otherwise (so a smoke test passes).

use wdp_guest_sdk::{
    Allocate, Candidate, ContainerResponse, Device, DeviceFacts, DeviceRef, DeviceSpec, Discovery,
    Health, Mount, PreStart, PreferredAllocation, PreferredRequest, Verdict,
};

struct Nonsense;

fn device(id: &str, candidates: Vec<String>) -> Device {
    Device {
        id: id.to_string(),
        candidates,
        numa_nodes: vec![-7],
        attributes: Vec::new(),
        replicas: 0,
    }
}

impl Discovery for Nonsense {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        let first = candidates.first().map(|c| c.id.clone()).unwrap_or_default();
        Ok(vec![
            device("dup", vec![first.clone()]),
            device("dup", vec![first.clone()]),
            device("", vec![first.clone()]),
            device(&"x".repeat(64), vec![first]),
            device("ghost", vec!["no-such-candidate".to_string()]),
        ])
    }
}

impl Health for Nonsense {
    fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        let mut verdicts = vec![
            Verdict::healthy("no-such-device", "made up"),
            Verdict::unhealthy("replica::0", "replica IDs are not device IDs"),
        ];
        if let Some(first) = devices.first() {
            verdicts.push(Verdict::healthy(first.device.id.clone(), "first"));
            verdicts.push(Verdict::unhealthy(
                first.device.id.clone(),
                "contradicts itself",
            ));
        }
        Ok(verdicts)
    }
}

impl PreferredAllocation for Nonsense {
    fn choose(request: PreferredRequest) -> Result<Vec<String>, String> {
        // Ignore must-include, repeat the first available ID, add an
        // unknown one, and answer one more than asked.
        let mut ids: Vec<String> = request
            .available
            .iter()
            .filter(|d| !request.must_include.contains(&d.id))
            .map(|d| d.id.clone())
            .collect();
        if let Some(first) = ids.first().cloned() {
            ids.insert(0, first);
        }
        ids.insert(0, "no-such-device".to_string());
        ids.truncate(request.size as usize + 1);
        Ok(ids)
    }
}

impl Allocate for Nonsense {
    fn allocate(
        devices: Vec<DeviceRef>,
        mut default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        default.envs.push((String::new(), "empty name".to_string()));
        default.mounts.push(Mount {
            container_path: "data".to_string(),
            host_path: "relative/path".to_string(),
            read_only: false,
        });
        default.devices.push(DeviceSpec {
            container_path: "/dev/fake".to_string(),
            host_path: "dev/fake".to_string(),
            permissions: "rwxz".to_string(),
        });
        default
            .cdi_devices
            .push(format!("not a cdi name {}", devices.len()));
        Ok(default)
    }
}

impl PreStart for Nonsense {
    fn pre_start(devices: Vec<DeviceRef>) -> Result<(), String> {
        if devices.is_empty() {
            return Ok(());
        }
        Err("x".repeat(5 * 1024 * 1024))
    }
}

wdp_guest_sdk::export_discovery!(Nonsense);
wdp_guest_sdk::export_health!(Nonsense);
wdp_guest_sdk::export_preferred_allocation!(Nonsense);
wdp_guest_sdk::export_allocate!(Nonsense);
wdp_guest_sdk::export_pre_start!(Nonsense);
