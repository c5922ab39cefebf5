//! `hostile-stderr-writer`: writes to stderr in every hook, then answers
//! like a well-behaved guest.
//!
//! Writing to stderr is legal for a guest (a Rust panic message lands
//! there), so every subcommand of the host (`check`, `test`, `run`, `demo`)
//! must take it in its stride: the bytes are kept (bounded) to explain a
//! trap, nothing blocks and nothing panics. Each hook writes one line and
//! then a burst larger than the host keeps, and answers:
//!
//! - discovery: one device per present candidate, its ID unchanged;
//! - health: no verdict (the built-in rule decides);
//! - preferred-allocation: the must-include IDs, then the first available;
//! - allocate: the built-in response unchanged;
//! - pre-start: allowed.

use std::io::Write;

use wdp_guest_sdk::{
    Allocate, Candidate, ContainerResponse, Device, DeviceFacts, DeviceRef, Discovery, Health,
    PreStart, PreferredAllocation, PreferredRequest, Verdict,
};

struct StderrWriter;

/// One line naming the hook, then 8 KiB of filler, then a flush.
fn shout(hook: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "stderr-writer: hook {hook} writes to stderr");
    let filler = [b'x'; 1024];
    for _ in 0..8 {
        let _ = stderr.write_all(&filler);
    }
    let _ = writeln!(stderr);
    let _ = stderr.flush();
}

impl Discovery for StderrWriter {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        shout("discovery");
        Ok(candidates
            .into_iter()
            .filter(|c| c.present)
            .map(|c| Device {
                candidates: vec![c.id.clone()],
                id: c.id,
                numa_nodes: c.numa_nodes,
                attributes: c.attributes,
                replicas: 1,
            })
            .collect())
    }
}

impl Health for StderrWriter {
    fn check(_devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        shout("health");
        Ok(Vec::new())
    }
}

impl PreferredAllocation for StderrWriter {
    fn choose(request: PreferredRequest) -> Result<Vec<String>, String> {
        shout("preferred-allocation");
        let size = usize::try_from(request.size).unwrap_or(0);
        let mut chosen = request.must_include.clone();
        for device in request.available {
            if chosen.len() >= size {
                break;
            }
            if !chosen.contains(&device.id) {
                chosen.push(device.id);
            }
        }
        Ok(chosen)
    }
}

impl Allocate for StderrWriter {
    fn allocate(
        _devices: Vec<DeviceRef>,
        default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        shout("allocate");
        Ok(default)
    }
}

impl PreStart for StderrWriter {
    fn pre_start(_devices: Vec<DeviceRef>) -> Result<(), String> {
        shout("pre-start");
        Ok(())
    }
}

wdp_guest_sdk::export_discovery!(StderrWriter);
wdp_guest_sdk::export_health!(StderrWriter);
wdp_guest_sdk::export_preferred_allocation!(StderrWriter);
wdp_guest_sdk::export_allocate!(StderrWriter);
wdp_guest_sdk::export_pre_start!(StderrWriter);
