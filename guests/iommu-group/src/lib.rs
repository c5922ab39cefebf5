//! `iommu-group`: a discovery guest for VFIO passthrough.
//!
//! A VM (or a container running one) can only be given a whole IOMMU group:
//! the kernel hands out `/dev/vfio/<group>`, never a single function. This
//! guest therefore makes one device per IOMMU group from the PCI candidates
//! the resource selected (typically `[[pci]] driver = "vfio-pci"`): its ID
//! is `<id-prefix><group>` (config `id-prefix`, default `iommu-group-`, so
//! `iommu-group-30`), its candidates are every selected function of the
//! group (so their nodes, `/dev/vfio/<group>`, reach the container and the
//! built-in health rule watches all of them), its NUMA nodes the union of
//! theirs. Attributes: `vfio.group` (the group number), `pci.addresses`
//! (the functions, comma-separated, sorted) and the first function's
//! `pci.vendor`, `pci.device` and `pci.numa-node`. Candidates that are not
//! present, not PCI or without an IOMMU group are left out (logged).
//!
//! ```toml
//! [guest-config]
//! id-prefix = "iommu-group-"
//! ```

use wdp_guest_sdk::{Candidate, CandidateKind, Device, Discovery};

struct IommuGroup;

/// A prefix that keeps IDs valid kubelet device IDs and CDI device names.
fn valid_prefix(prefix: &str) -> bool {
    prefix.len() <= 40
        && prefix.starts_with(|c: char| c.is_ascii_alphanumeric())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Discovery for IommuGroup {
    fn discover(candidates: Vec<Candidate>) -> Result<Vec<Device>, String> {
        let config = wdp_guest_sdk::config();
        let prefix = config
            .get_or("id-prefix", "iommu-group-")
            .trim()
            .to_string();
        if !valid_prefix(&prefix) {
            return Err(format!(
                "guest-config id-prefix {prefix:?} must start with a letter or digit and hold only letters, digits, '-', '_', '.' (at most 40)"
            ));
        }

        // (group number, its candidates), in group-number order.
        let mut groups: Vec<(u64, Vec<Candidate>)> = Vec::new();
        for candidate in candidates {
            if !candidate.present || candidate.kind != CandidateKind::Pci {
                continue;
            }
            let Some(group) = candidate
                .attr("pci.iommu-group")
                .and_then(|g| g.trim().parse::<u64>().ok())
            else {
                wdp_guest_sdk::warn!("{} has no IOMMU group; left out", candidate.id);
                continue;
            };
            match groups.iter_mut().find(|(g, _)| *g == group) {
                Some((_, members)) => members.push(candidate),
                None => groups.push((group, vec![candidate])),
            }
        }
        groups.sort_by_key(|(g, _)| *g);

        let devices = groups
            .into_iter()
            .map(|(group, mut members)| {
                members.sort_by(|a, b| a.id.cmp(&b.id));
                let mut numa_nodes: Vec<i64> = members
                    .iter()
                    .flat_map(|m| m.numa_nodes.iter().copied())
                    .collect();
                numa_nodes.sort_unstable();
                numa_nodes.dedup();
                let addresses: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
                let mut attributes = vec![
                    ("vfio.group".to_string(), group.to_string()),
                    ("pci.addresses".to_string(), addresses.join(",")),
                ];
                for key in ["pci.vendor", "pci.device", "pci.numa-node"] {
                    if let Some(value) = members[0].attr(key) {
                        attributes.push((key.to_string(), value.to_string()));
                    }
                }
                Device {
                    id: format!("{prefix}{group}"),
                    candidates: addresses,
                    numa_nodes,
                    attributes,
                    replicas: 1,
                }
            })
            .collect();
        Ok(devices)
    }
}

wdp_guest_sdk::export_discovery!(IommuGroup);
