//! `presence-health`: a health guest.
//!
//! A device is unhealthy while any of its candidates is not present, and
//! (for PCI candidates) while no driver is bound or the bound driver is not
//! in the config list `drivers` (when given). It is healthy again as soon as
//! every candidate is back. Every verdict carries a reason.
//!
//! ```toml
//! [guest-config]
//! drivers = "nvidia,vfio-pci"
//! ```

use wdp_guest_sdk::{Candidate, CandidateKind, DeviceFacts, Health, Verdict};

struct PresenceHealth;

/// Why `candidate` makes its device unhealthy, if it does.
fn problem(candidate: &Candidate, drivers: &[String]) -> Option<String> {
    if !candidate.present {
        return Some(format!("candidate {} is not present", candidate.id));
    }
    if candidate.kind != CandidateKind::Pci {
        return None;
    }
    match candidate.attr("pci.driver").filter(|d| !d.is_empty()) {
        None => Some(format!("candidate {} has no driver bound", candidate.id)),
        Some(driver) if !drivers.is_empty() && !drivers.iter().any(|d| d == driver) => {
            Some(format!(
                "candidate {} is bound to driver {driver}, expected one of {}",
                candidate.id,
                drivers.join(", ")
            ))
        }
        Some(_) => None,
    }
}

fn verdict(facts: &DeviceFacts, drivers: &[String]) -> Verdict {
    let mut problems = Vec::new();
    for id in &facts.device.candidates {
        match facts.candidates.iter().find(|c| &c.id == id) {
            None => problems.push(format!("candidate {id} is gone")),
            Some(candidate) => problems.extend(problem(candidate, drivers)),
        }
    }
    if problems.is_empty() {
        Verdict::healthy(
            facts.device.id.clone(),
            format!("all {} candidates present", facts.device.candidates.len()),
        )
    } else {
        Verdict::unhealthy(facts.device.id.clone(), problems.join("; "))
    }
}

impl Health for PresenceHealth {
    fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        let drivers = wdp_guest_sdk::config().list("drivers");
        Ok(devices
            .iter()
            .map(|facts| verdict(facts, &drivers))
            .collect())
    }
}

wdp_guest_sdk::export_health!(PresenceHealth);
