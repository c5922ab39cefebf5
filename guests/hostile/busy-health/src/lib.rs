//! `hostile-busy-health`: a health hook that spins until the host's deadline
//! interrupts it whenever any candidate's sysfs attribute `busy` reads `1`,
//! and calls every device healthy otherwise.
//!
//! Tests and benchmarks turn a running resource's policy busy (or
//! trapping-by-timeout) and back by writing that file, without a reload.

use wdp_guest_sdk::{DeviceFacts, Health, Verdict, hardware};

struct BusyHealth;

fn busy(devices: &[DeviceFacts]) -> bool {
    devices
        .iter()
        .flat_map(|d| &d.candidates)
        .any(|c| hardware::read_attribute(&c.id, "busy").is_ok_and(|value| value.trim() == "1"))
}

impl Health for BusyHealth {
    fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        if busy(&devices) {
            let mut spins: u64 = 0;
            loop {
                spins = std::hint::black_box(spins.wrapping_add(1));
            }
        }
        Ok(devices
            .into_iter()
            .map(|d| Verdict::healthy(d.device.id, "not busy"))
            .collect())
    }
}

wdp_guest_sdk::export_health!(BusyHealth);
