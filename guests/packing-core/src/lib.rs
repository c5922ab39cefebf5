//! NUMA / link-locality packing: the pure logic behind the `numa-packing`
//! guest, kept free of any binding so the same code also runs natively (the
//! host's benchmark compares the two).
//!
//! Given the devices the kubelet may hand out, the IDs that must be part of
//! the answer and the exact number of IDs wanted, [`choose`] answers:
//!
//! 1. every must-include ID (once);
//! 2. then devices on the NUMA node(s) of the must-include devices, then on
//!    the NUMA nodes with the most available devices (a device without NUMA
//!    information comes last);
//! 3. within a NUMA node, devices sharing a link group with what was already
//!    chosen, then whole link groups by best fit (the smallest group that
//!    covers what is still missing, so bigger groups stay intact for bigger
//!    requests; when none is big enough, the biggest group first). A device's
//!    link group is its `link.group` attribute or, failing that, the
//!    grandparent of its `pci.path` (devices behind the same PCIe switch
//!    share the switch's upstream port);
//! 4. ties broken by ID, so the answer is deterministic.
//!
//! The answer has exactly `size` distinct IDs, all taken from `available`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// One device the packer may choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item<'a> {
    /// The ID the kubelet uses.
    pub id: &'a str,
    /// NUMA nodes the device is local to (empty when unknown).
    pub numa_nodes: &'a [i64],
    /// The device's link-locality group, see [`locality_key`].
    pub locality: Option<&'a str>,
}

impl<'a> Item<'a> {
    /// Builds an item from a device's ID, NUMA nodes and attributes.
    pub fn new(id: &'a str, numa_nodes: &'a [i64], attributes: &'a [(String, String)]) -> Self {
        Self {
            id,
            numa_nodes,
            locality: locality_key(attributes),
        }
    }
}

/// The link-locality key of a device: its `link.group` attribute, or the
/// grandparent directory of its `pci.path` attribute (the upstream port of
/// the PCIe switch it sits behind), or `None`.
pub fn locality_key(attributes: &[(String, String)]) -> Option<&str> {
    let lookup = |name: &str| {
        attributes
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
            .filter(|value| !value.is_empty())
    };
    if let Some(group) = lookup("link.group") {
        return Some(group);
    }
    // GPU → downstream port → switch upstream port: devices behind one
    // PCIe switch share their grandparent.
    parent_dir(lookup("pci.path")?).and_then(parent_dir)
}

/// The parent directory of a path, or `None` (no slash, or an empty parent).
fn parent_dir(path: &str) -> Option<&str> {
    path.trim_end_matches('/')
        .rsplit_once('/')
        .map(|(parent, _)| parent)
        .filter(|parent| !parent.is_empty())
}

/// Why a request cannot be answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PackError {
    /// A must-include ID is not among the available devices.
    MustIncludeNotAvailable(String),
    /// More distinct must-include IDs than the requested size.
    TooManyMustInclude {
        /// Distinct must-include IDs.
        must_include: usize,
        /// Requested size.
        size: usize,
    },
    /// Fewer distinct available devices than the requested size.
    NotEnoughDevices {
        /// Distinct available IDs.
        available: usize,
        /// Requested size.
        size: usize,
    },
}

impl fmt::Display for PackError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::MustIncludeNotAvailable(id) => {
                write!(f, "must-include device {id:?} is not available")
            }
            Self::TooManyMustInclude { must_include, size } => write!(
                f,
                "{must_include} must-include devices do not fit an allocation of {size}"
            ),
            Self::NotEnoughDevices { available, size } => write!(
                f,
                "only {available} devices available for an allocation of {size}"
            ),
        }
    }
}

impl std::error::Error for PackError {}

/// One NUMA tier: devices by link group, and devices without one.
type Tier<'a> = (BTreeMap<&'a str, Vec<&'a str>>, Vec<&'a str>);

/// A link group (or a lone device) inside one NUMA tier.
struct Group<'a> {
    key: Option<&'a str>,
    /// Member IDs, sorted.
    members: Vec<&'a str>,
}

/// Chooses exactly `size` distinct IDs from `available`, including every
/// ID of `must_include`; see the crate documentation for the preferences.
pub fn choose<'a>(
    available: &[Item<'a>],
    must_include: &[&str],
    size: usize,
) -> Result<Vec<&'a str>, PackError> {
    // Distinct available devices, first occurrence wins.
    let mut by_id: BTreeMap<&'a str, usize> = BTreeMap::new();
    for (index, item) in available.iter().enumerate() {
        by_id.entry(item.id).or_insert(index);
    }
    if by_id.len() < size {
        return Err(PackError::NotEnoughDevices {
            available: by_id.len(),
            size,
        });
    }

    let mut chosen: Vec<&'a str> = Vec::with_capacity(size);
    let mut chosen_set: BTreeSet<&'a str> = BTreeSet::new();
    for id in must_include {
        let Some(&index) = by_id.get(id) else {
            return Err(PackError::MustIncludeNotAvailable((*id).to_string()));
        };
        let id = available[index].id;
        if chosen_set.insert(id) {
            chosen.push(id);
        }
    }
    if chosen.len() > size {
        return Err(PackError::TooManyMustInclude {
            must_include: chosen.len(),
            size,
        });
    }
    let mut remaining = size - chosen.len();
    if remaining == 0 {
        return Ok(chosen);
    }

    // Rank NUMA nodes: nodes of must-include devices first (most such
    // devices first), then by the number of other available devices.
    let mut per_node: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
    let mut affinity: BTreeSet<&'a str> = BTreeSet::new();
    for (&id, &index) in &by_id {
        let item = &available[index];
        let must = chosen_set.contains(id);
        for &node in item.numa_nodes {
            let entry = per_node.entry(node).or_default();
            if must {
                entry.0 += 1;
            } else {
                entry.1 += 1;
            }
        }
        if must && let Some(key) = item.locality {
            affinity.insert(key);
        }
    }
    let mut nodes: Vec<(i64, (usize, usize))> = per_node.into_iter().collect();
    nodes.sort_by(|a, b| {
        (b.1.0, b.1.1)
            .cmp(&(a.1.0, a.1.1))
            .then_with(|| a.0.cmp(&b.0))
    });
    let rank: BTreeMap<i64, usize> = nodes
        .iter()
        .enumerate()
        .map(|(rank, (node, _))| (*node, rank))
        .collect();

    // Tier -> locality key -> members. Devices without NUMA go last, devices
    // without a locality key are groups of their own.
    let mut tiers: BTreeMap<usize, Tier<'a>> = BTreeMap::new();
    for (&id, &index) in &by_id {
        if chosen_set.contains(id) {
            continue;
        }
        let item = &available[index];
        let tier = item
            .numa_nodes
            .iter()
            .filter_map(|node| rank.get(node).copied())
            .min()
            .unwrap_or(usize::MAX);
        let (grouped, lone) = tiers.entry(tier).or_default();
        match item.locality {
            Some(key) => grouped.entry(key).or_default().push(id),
            None => lone.push(id),
        }
    }

    for (_, (grouped, lone)) in tiers {
        if remaining == 0 {
            break;
        }
        // Members are already sorted: `by_id` iterates in ID order.
        let mut groups: Vec<Group<'a>> = grouped
            .into_iter()
            .map(|(key, members)| Group {
                key: Some(key),
                members,
            })
            .chain(lone.into_iter().map(|id| Group {
                key: None,
                members: vec![id],
            }))
            .collect();

        // Groups linked to what is already chosen come first, by key.
        let mut index = 0;
        while index < groups.len() && remaining > 0 {
            if groups[index].key.is_some_and(|key| affinity.contains(key)) {
                let group = groups.remove(index);
                take(&group, &mut remaining, &mut chosen);
            } else {
                index += 1;
            }
        }

        // Then best fit: sorted by (size, key, first ID).
        groups.sort_by(|a, b| {
            (a.members.len(), a.key, a.members[0]).cmp(&(b.members.len(), b.key, b.members[0]))
        });
        while remaining > 0 && !groups.is_empty() {
            let fits = groups.partition_point(|group| group.members.len() < remaining);
            let pick = if fits < groups.len() {
                fits
            } else {
                // None covers the rest: the biggest group (first of the
                // biggest size, so the smallest key).
                let biggest = groups[groups.len() - 1].members.len();
                groups.partition_point(|group| group.members.len() < biggest)
            };
            let group = groups.remove(pick);
            take(&group, &mut remaining, &mut chosen);
        }
    }
    Ok(chosen)
}

fn take<'a>(group: &Group<'a>, remaining: &mut usize, chosen: &mut Vec<&'a str>) {
    let count = group.members.len().min(*remaining);
    chosen.extend_from_slice(&group.members[..count]);
    *remaining -= count;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item<'a>(id: &'a str, numa: &'a [i64], locality: Option<&'a str>) -> Item<'a> {
        Item {
            id,
            numa_nodes: numa,
            locality,
        }
    }

    #[test]
    fn keeps_must_include_and_prefers_its_numa_node() {
        let devices = [
            item("a0", &[0], None),
            item("a1", &[0], None),
            item("b0", &[1], None),
            item("b1", &[1], None),
            item("b2", &[1], None),
        ];
        assert_eq!(choose(&devices, &["a1"], 2).unwrap(), ["a1", "a0"]);
        // Without must-include: the node with the most devices.
        assert_eq!(choose(&devices, &[], 2).unwrap(), ["b0", "b1"]);
        assert_eq!(choose(&devices, &[], 4).unwrap(), ["b0", "b1", "b2", "a0"]);
    }

    #[test]
    fn best_fit_link_groups() {
        let devices = [
            item("g0", &[0], Some("big")),
            item("g1", &[0], Some("big")),
            item("g2", &[0], Some("big")),
            item("g3", &[0], Some("big")),
            item("s0", &[0], Some("small")),
            item("s1", &[0], Some("small")),
            item("x", &[0], None),
        ];
        assert_eq!(choose(&devices, &[], 2).unwrap(), ["s0", "s1"]);
        assert_eq!(choose(&devices, &[], 1).unwrap(), ["x"]);
        assert_eq!(choose(&devices, &[], 3).unwrap(), ["g0", "g1", "g2"]);
        assert_eq!(
            choose(&devices, &[], 5).unwrap(),
            ["g0", "g1", "g2", "g3", "x"]
        );
        // Affinity with a must-include device's link group.
        assert_eq!(choose(&devices, &["g3"], 2).unwrap(), ["g3", "g0"]);
    }

    #[test]
    fn errors_and_duplicates() {
        let devices = [
            item("a", &[], None),
            item("a", &[], None),
            item("b", &[], None),
        ];
        assert_eq!(
            choose(&devices, &[], 3),
            Err(PackError::NotEnoughDevices {
                available: 2,
                size: 3
            })
        );
        assert_eq!(
            choose(&devices, &["zz"], 1),
            Err(PackError::MustIncludeNotAvailable("zz".into()))
        );
        assert!(matches!(
            choose(&devices, &["a", "b"], 1),
            Err(PackError::TooManyMustInclude { .. })
        ));
        assert_eq!(choose(&devices, &["a", "a"], 2).unwrap(), ["a", "b"]);
        assert_eq!(choose(&devices, &[], 0).unwrap(), Vec::<&str>::new());
    }

    #[test]
    fn locality_from_attributes() {
        let attrs = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let a = attrs(&[(
            "pci.path",
            "/sys/devices/pci0000:80/0000:80:03.0/0000:85:00.0/0000:86:08.0/0000:87:00.0",
        )]);
        assert_eq!(
            locality_key(&a),
            Some("/sys/devices/pci0000:80/0000:80:03.0/0000:85:00.0")
        );
        assert_eq!(locality_key(&attrs(&[("pci.path", "/x/y")])), None);
        let b = attrs(&[("pci.path", "/x/y"), ("link.group", "nvlink-0")]);
        assert_eq!(locality_key(&b), Some("nvlink-0"));
        assert_eq!(locality_key(&[]), None);
    }

    #[test]
    fn large_sets_are_exact_and_distinct() {
        let ids: Vec<String> = (0..1024).map(|i| format!("dev{i:04}")).collect();
        let numa: Vec<[i64; 1]> = (0..1024).map(|i| [i64::from(i % 4 == 0)]).collect();
        let groups: Vec<String> = (0..1024).map(|i| format!("sw{}", i / 8)).collect();
        let devices: Vec<Item<'_>> = (0..1024)
            .map(|i| item(&ids[i], &numa[i], Some(groups[i].as_str())))
            .collect();
        for size in [1, 7, 8, 100, 1024] {
            let got = choose(&devices, &["dev0005"], size).unwrap();
            assert_eq!(got.len(), size);
            let set: BTreeSet<_> = got.iter().collect();
            assert_eq!(set.len(), size);
        }
    }
}
