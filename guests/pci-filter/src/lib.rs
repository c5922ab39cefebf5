//! `pci-filter`: a discovery guest.
//!
//! Keeps the PCI candidates whose `pci.vendor` is in the config list
//! `vendors` and whose `pci.class` starts with one of the config list
//! `classes` (`"0x0302"` matches the sysfs class `0x030200`); an empty or
//! unset list matches everything. Device-node and USB candidates pass
//! through. Every kept candidate becomes one device with the candidate's ID,
//! NUMA nodes and attributes, shared `replicas` times (config, default 1).
//!
//! ```toml
//! [guest-config]
//! vendors = "0x10de,0x1002"
//! classes = "0x0302,0x0300"
//! replicas = 1
//! ```

use wdp_guest_sdk::{Candidate, CandidateKind, Device, Discovery};

struct PciFilter;

/// `"0x10DE"`, `"10de"` -> `"10de"`.
fn normalize_hex(value: &str) -> String {
    let value = value.trim();
    let value = value
        .strip_prefix("0x")
        .or_else(|| value.strip_prefix("0X"))
        .unwrap_or(value);
    value.to_ascii_lowercase()
}

fn keep(candidate: &Candidate, vendors: &[String], classes: &[String]) -> bool {
    if !candidate.present {
        return false;
    }
    if candidate.kind != CandidateKind::Pci {
        return true;
    }
    let vendor = candidate.attr("pci.vendor").map(normalize_hex);
    let class = candidate.attr("pci.class").map(normalize_hex);
    let vendor_ok = vendors.is_empty() || vendor.is_some_and(|v| vendors.contains(&v));
    let class_ok = classes.is_empty()
        || class.is_some_and(|c| classes.iter().any(|prefix| c.starts_with(prefix.as_str())));
    vendor_ok && class_ok
}

impl Discovery for PciFilter {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        let config = wdp_guest_sdk::config();
        let vendors: Vec<String> = config
            .list("vendors")
            .iter()
            .map(|v| normalize_hex(v))
            .collect();
        let classes: Vec<String> = config
            .list("classes")
            .iter()
            .map(|c| normalize_hex(c))
            .collect();
        let replicas = config.parse::<u32>("replicas")?.unwrap_or(1).max(1);

        let total = candidates.len();
        let devices: Vec<Device> = candidates
            .into_iter()
            .filter(|candidate| keep(candidate, &vendors, &classes))
            .map(|candidate| Device {
                candidates: vec![candidate.id.clone()],
                id: candidate.id,
                numa_nodes: candidate.numa_nodes,
                attributes: candidate.attributes,
                replicas,
            })
            .collect();
        wdp_guest_sdk::debug!("kept {} of {total} candidates", devices.len());
        Ok(devices)
    }
}

wdp_guest_sdk::export_discovery!(PciFilter);
