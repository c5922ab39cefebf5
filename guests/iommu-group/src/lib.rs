//! `iommu-group`: a discovery guest for VFIO passthrough.
//!
//! A VM (or a container running one) can only be given a whole IOMMU group:
//! the kernel hands out `/dev/vfio/<group>`, and the group is only usable
//! while every function in it is bound to `vfio-pci` (or to no driver).
//! This guest therefore makes one device per IOMMU group that holds at least
//! one function bound to one of the config list `drivers` (default
//! `vfio-pci`): its ID is `<id-prefix><group>` (config `id-prefix`, default
//! `iommu-group-`, so `iommu-group-30`), its candidates are **every**
//! selected function of the group, bound or not (so select all functions,
//! `[[pci]] address = "*"`, and a health rule that checks drivers, such as
//! `presence-health` with the same `drivers`, turns the group Unhealthy when
//! one of its functions is taken by a host driver). NUMA nodes: the union of
//! the members'. Attributes: `vfio.group` (the number), `vfio.viable`
//! (`true` while every member is bound to one of `drivers`),
//! `pci.addresses` (the functions, comma-separated, sorted) and the first
//! bound function's `pci.vendor`, `pci.device` and `pci.numa-node`.
//! Candidates that are not present, not PCI or without an IOMMU group are
//! left out.
//!
//! ```toml
//! [guest-config]
//! id-prefix = "iommu-group-"
//! drivers = "vfio-pci"
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

        let mut drivers = config.list("drivers");
        if drivers.is_empty() {
            drivers.push("vfio-pci".to_string());
        }
        let bound = |c: &Candidate| {
            c.attr("pci.driver")
                .is_some_and(|d| drivers.iter().any(|x| x == d))
        };

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
                continue;
            };
            match groups.iter_mut().find(|(g, _)| *g == group) {
                Some((_, members)) => members.push(candidate),
                None => groups.push((group, vec![candidate])),
            }
        }
        groups.retain(|(_, members)| members.iter().any(&bound));
        groups.sort_by_key(|(g, _)| *g);

        let devices = groups
            .into_iter()
            .map(|(group, mut members)| {
                members.sort_by(|a, b| a.id.cmp(&b.id));
                let viable = members.iter().all(&bound);
                let first = members.iter().find(|m| bound(m)).unwrap_or(&members[0]);
                let mut numa_nodes: Vec<i64> = members
                    .iter()
                    .flat_map(|m| m.numa_nodes.iter().copied())
                    .collect();
                numa_nodes.sort_unstable();
                numa_nodes.dedup();
                let addresses: Vec<String> = members.iter().map(|m| m.id.clone()).collect();
                let mut attributes = vec![
                    ("vfio.group".to_string(), group.to_string()),
                    ("vfio.viable".to_string(), viable.to_string()),
                    ("pci.addresses".to_string(), addresses.join(",")),
                ];
                for key in ["pci.vendor", "pci.device", "pci.numa-node"] {
                    if let Some(value) = first.attr(key) {
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
