//! `hostile-memory-bomb`: allocates without end (the host's memory cap must stop it).
//!
//! Exports every hook; each one misbehaves the same way, so the host can be
//! tested hook by hook — but only when given work (non-empty input, or a
//! non-zero size): with empty input every hook answers politely, so the
//! guest passes a smoke test, goes into service, and misbehaves under load.

use wdp_guest_sdk::{
    Allocate, Candidate, ContainerResponse, Device, DeviceFacts, DeviceRef, Discovery, Health,
    PreStart, PreferredAllocation, PreferredRequest, Verdict,
};

struct Hostile;

fn misbehave(hook: &str) -> ! {
    wdp_guest_sdk::debug!("{hook}: allocating without end");
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Touch the memory so nothing is optimised away.
        hoard.push(core::hint::black_box(vec![0xa5; 1 << 20]));
    }
}

impl Discovery for Hostile {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        if candidates.is_empty() {
            return Ok(Vec::new());
        }
        misbehave("discovery")
    }
}

impl Health for Hostile {
    fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        if devices.is_empty() {
            return Ok(Vec::new());
        }
        misbehave("health")
    }
}

impl PreferredAllocation for Hostile {
    fn choose(request: PreferredRequest) -> Result<Vec<String>, String> {
        if request.size == 0 && request.available.is_empty() {
            return Ok(Vec::new());
        }
        misbehave("preferred-allocation")
    }
}

impl Allocate for Hostile {
    fn allocate(
        devices: Vec<DeviceRef>,
        default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        if devices.is_empty() {
            return Ok(default);
        }
        misbehave("allocate")
    }
}

impl PreStart for Hostile {
    fn pre_start(devices: Vec<DeviceRef>) -> Result<(), String> {
        if devices.is_empty() {
            return Ok(());
        }
        misbehave("pre-start")
    }
}

wdp_guest_sdk::export_discovery!(Hostile);
wdp_guest_sdk::export_health!(Hostile);
wdp_guest_sdk::export_preferred_allocation!(Hostile);
wdp_guest_sdk::export_allocate!(Hostile);
wdp_guest_sdk::export_pre_start!(Hostile);
