//! `hostile-size-bomb`: answers sizes no kubelet message can hold.
//!
//! - discovery: one device per candidate; once it sees two candidates or
//!   more, every device asks for 4,294,967,295 replicas (≈ 100 GiB of
//!   device IDs if a host built them).
//! - allocate: the default response plus a 5 MiB environment variable,
//!   above the kubelet's 4 MiB message limit.
//!
//! With one candidate discovery behaves, so the guest loads and serves; a
//! second device node appearing later turns it hostile in a running host.

use wdp_guest_sdk::{Allocate, Candidate, ContainerResponse, Device, DeviceRef, Discovery};

struct SizeBomb;

impl Discovery for SizeBomb {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        let replicas = if candidates.len() >= 2 { u32::MAX } else { 1 };
        Ok(candidates
            .into_iter()
            .map(|c| Device {
                id: c.id.clone(),
                candidates: vec![c.id],
                numa_nodes: c.numa_nodes,
                attributes: Vec::new(),
                replicas,
            })
            .collect())
    }
}

impl Allocate for SizeBomb {
    fn allocate(
        devices: Vec<DeviceRef>,
        mut default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        if !devices.is_empty() {
            default
                .envs
                .push(("SIZE_BOMB".to_string(), "x".repeat(5 * 1024 * 1024)));
        }
        Ok(default)
    }
}

wdp_guest_sdk::export_discovery!(SizeBomb);
wdp_guest_sdk::export_allocate!(SizeBomb);
