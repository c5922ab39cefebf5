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

use std::collections::BTreeMap;
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
    /// A position outside the [`Table`].
    NotInTable {
        /// The position.
        position: u32,
        /// How many positions the table has.
        len: usize,
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
            Self::NotInTable { position, len } => write!(
                f,
                "position {position} is outside the device table of {len}"
            ),
        }
    }
}

impl std::error::Error for PackError {}

/// A position's locality group when it has none.
const NO_GROUP: u32 = u32::MAX;

/// A device table prepared for packing: every comparison the packer makes
/// afterwards is between integers. IDs are ranked in ID order and link
/// groups in key order once, here (each distinct key hashed once, only
/// the distinct keys sorted), so choosing never compares a string.
///
/// Build it once per device set and call [`Table::choose`] with positions
/// (what the `preferred-allocation-indexed` guest does), or let [`choose`]
/// build one per call from [`Item`]s.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Every ID, concatenated; `spans[p]` is where position `p`'s is.
    id_text: String,
    spans: Vec<(u32, u32)>,
    /// For each position, the first position with the same ID.
    canonical: Vec<u32>,
    /// For each position, the rank of its ID in ID order.
    rank: Vec<u32>,
    /// For each position, its link group's rank in key order, or `NO_GROUP`.
    group: Vec<u32>,
    /// How many distinct link groups there are.
    groups: usize,
    /// `numa[numa_start[p]..numa_start[p + 1]]`: position `p`'s NUMA nodes.
    numa_start: Vec<u32>,
    numa: Vec<i64>,
    /// Canonical positions in ID order (lookups by ID).
    by_id: Vec<u32>,
}

impl Table {
    /// Prepares `items` (positions are indexes into it).
    pub fn new(items: &[Item<'_>]) -> Self {
        let n = items.len();
        let mut id_text = String::with_capacity(items.iter().map(|i| i.id.len()).sum());
        let mut spans = Vec::with_capacity(n);
        let mut numa_start = Vec::with_capacity(n + 1);
        let mut numa = Vec::with_capacity(n);
        for item in items {
            let start = id_text.len() as u32;
            id_text.push_str(item.id);
            spans.push((start, id_text.len() as u32));
            numa_start.push(numa.len() as u32);
            numa.extend_from_slice(item.numa_nodes);
        }
        numa_start.push(numa.len() as u32);

        // IDs in order; equal IDs keep their positions' order (stable sort),
        // so the first occurrence is canonical.
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|&a, &b| items[a as usize].id.cmp(items[b as usize].id));
        let mut canonical = vec![0; n];
        let mut rank = vec![0; n];
        let mut by_id = Vec::with_capacity(n);
        for (k, &position) in order.iter().enumerate() {
            let p = position as usize;
            match k.checked_sub(1).map(|prev| order[prev] as usize) {
                Some(prev) if items[prev].id == items[p].id => {
                    canonical[p] = canonical[prev];
                    rank[p] = rank[prev];
                }
                _ => {
                    canonical[p] = position;
                    rank[p] = by_id.len() as u32;
                    by_id.push(position);
                }
            }
        }

        // Link groups: distinct keys by hash, then only those sorted.
        let mut distinct: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
        let mut group: Vec<u32> = items
            .iter()
            .map(|item| match item.locality {
                Some(key) => {
                    let next = distinct.len() as u32;
                    *distinct.entry(key).or_insert(next)
                }
                None => NO_GROUP,
            })
            .collect();
        let mut keys: Vec<(&str, u32)> = distinct.into_iter().collect();
        keys.sort_unstable();
        let mut key_rank = vec![0; keys.len()];
        for (rank, (_, id)) in keys.iter().enumerate() {
            key_rank[*id as usize] = rank as u32;
        }
        for g in &mut group {
            if *g != NO_GROUP {
                *g = key_rank[*g as usize];
            }
        }
        Self {
            id_text,
            spans,
            canonical,
            rank,
            group,
            groups: keys.len(),
            numa_start,
            numa,
            by_id,
        }
    }

    /// How many positions the table has.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The ID at `position`.
    pub fn id(&self, position: u32) -> &str {
        let (start, end) = self.spans[position as usize];
        &self.id_text[start as usize..end as usize]
    }

    /// The first position holding `id`.
    pub fn position_of(&self, id: &str) -> Option<u32> {
        self.by_id
            .binary_search_by(|&p| self.id(p).cmp(id))
            .ok()
            .map(|i| self.by_id[i])
    }

    fn numa_nodes(&self, position: u32) -> &[i64] {
        let p = position as usize;
        &self.numa[self.numa_start[p] as usize..self.numa_start[p + 1] as usize]
    }

    /// Chooses exactly `size` distinct positions from `available`,
    /// including every position of `must_include` (positions with the
    /// same ID count once; the first is answered); see the crate
    /// documentation for the preferences.
    pub fn choose(
        &self,
        available: &[u32],
        must_include: &[u32],
        size: usize,
    ) -> Result<Vec<u32>, PackError> {
        let n = self.len();
        let in_table = |p: u32| {
            if (p as usize) < n {
                Ok(self.canonical[p as usize])
            } else {
                Err(PackError::NotInTable {
                    position: p,
                    len: n,
                })
            }
        };
        let mut is_available = vec![false; n];
        let mut distinct: Vec<u32> = Vec::with_capacity(available.len());
        for &p in available {
            let c = in_table(p)?;
            if !std::mem::replace(&mut is_available[c as usize], true) {
                distinct.push(c);
            }
        }
        if distinct.len() < size {
            return Err(PackError::NotEnoughDevices {
                available: distinct.len(),
                size,
            });
        }
        let mut chosen: Vec<u32> = Vec::with_capacity(size);
        let mut is_chosen = vec![false; n];
        for &p in must_include {
            let c = in_table(p)?;
            if !is_available[c as usize] {
                return Err(PackError::MustIncludeNotAvailable(self.id(p).to_string()));
            }
            if !std::mem::replace(&mut is_chosen[c as usize], true) {
                chosen.push(c);
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
        // ID order from here on.
        distinct.sort_unstable_by_key(|&p| self.rank[p as usize]);

        // Rank NUMA nodes: nodes of must-include devices first (most such
        // devices first), then by the number of other available devices.
        let mut per_node: BTreeMap<i64, (usize, usize)> = BTreeMap::new();
        let mut affinity = vec![false; self.groups];
        for &p in &distinct {
            let must = is_chosen[p as usize];
            for &node in self.numa_nodes(p) {
                let entry = per_node.entry(node).or_default();
                if must {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
            }
            let group = self.group[p as usize];
            if must && group != NO_GROUP {
                affinity[group as usize] = true;
            }
        }
        let mut nodes: Vec<(i64, (usize, usize))> = per_node.into_iter().collect();
        nodes.sort_by(|a, b| {
            (b.1.0, b.1.1)
                .cmp(&(a.1.0, a.1.1))
                .then_with(|| a.0.cmp(&b.0))
        });
        let node_rank = |node: i64| nodes.iter().position(|(n, _)| *n == node);

        // Tier -> link group -> members (ID order). Devices without NUMA
        // go last, devices without a group are groups of their own.
        let mut tiers: BTreeMap<usize, Tier> = BTreeMap::new();
        for &p in &distinct {
            if is_chosen[p as usize] {
                continue;
            }
            let tier = self
                .numa_nodes(p)
                .iter()
                .filter_map(|&node| node_rank(node))
                .min()
                .unwrap_or(usize::MAX);
            let (grouped, lone) = tiers.entry(tier).or_default();
            match self.group[p as usize] {
                NO_GROUP => lone.push(p),
                group => grouped.entry(group).or_default().push(p),
            }
        }

        for (_, (grouped, lone)) in tiers {
            if remaining == 0 {
                break;
            }
            let mut groups: Vec<Group> = grouped
                .into_iter()
                .map(|(key, members)| Group {
                    key: Some(key),
                    members,
                })
                .chain(lone.into_iter().map(|p| Group {
                    key: None,
                    members: vec![p],
                }))
                .collect();

            // Groups linked to what is already chosen come first, by key.
            let mut index = 0;
            while index < groups.len() && remaining > 0 {
                if groups[index].key.is_some_and(|key| affinity[key as usize]) {
                    let group = groups.remove(index);
                    take(&group, &mut remaining, &mut chosen);
                } else {
                    index += 1;
                }
            }

            // Then best fit: sorted by (size, key, first ID).
            groups.sort_by_key(|g| (g.members.len(), g.key, self.rank[g.members[0] as usize]));
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
}

/// One NUMA tier: positions by link group, and positions without one.
type Tier = (BTreeMap<u32, Vec<u32>>, Vec<u32>);

/// A link group (or a lone device) inside one NUMA tier.
struct Group {
    key: Option<u32>,
    /// Member positions, in ID order.
    members: Vec<u32>,
}

/// Chooses exactly `size` distinct IDs from `available`, including every
/// ID of `must_include`; see the crate documentation for the preferences.
/// Builds a [`Table`] for the call: to choose often from one device set,
/// keep a table and call [`Table::choose`].
pub fn choose<'a>(
    available: &[Item<'a>],
    must_include: &[&str],
    size: usize,
) -> Result<Vec<&'a str>, PackError> {
    let table = Table::new(available);
    let all: Vec<u32> = (0..available.len() as u32).collect();
    if table.by_id.len() < size {
        return Err(PackError::NotEnoughDevices {
            available: table.by_id.len(),
            size,
        });
    }
    let must = must_include
        .iter()
        .map(|id| {
            table
                .position_of(id)
                .ok_or_else(|| PackError::MustIncludeNotAvailable((*id).to_string()))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    Ok(table
        .choose(&all, &must, size)?
        .into_iter()
        .map(|p| available[p as usize].id)
        .collect())
}

fn take(group: &Group, remaining: &mut usize, chosen: &mut Vec<u32>) {
    let count = group.members.len().min(*remaining);
    chosen.extend_from_slice(&group.members[..count]);
    *remaining -= count;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

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
    fn a_table_answers_positions_like_ids() {
        let devices = [
            item("g1", &[0], Some("big")),
            item("g0", &[0], Some("big")),
            item("s0", &[1], Some("small")),
            item("x", &[0], None),
            item("g0", &[0], Some("big")),
        ];
        let table = Table::new(&devices);
        assert_eq!(table.position_of("g0"), Some(1));
        assert_eq!(table.position_of("nope"), None);
        // Everything but `x`, with the duplicate `g0`: positions answered
        // are the first of each ID.
        assert_eq!(table.choose(&[0, 1, 2, 4], &[], 2).unwrap(), [1, 0]);
        assert_eq!(table.choose(&[0, 1, 2, 4], &[2], 2).unwrap(), [2, 1]);
        assert_eq!(
            table.choose(&[0, 9], &[], 1),
            Err(PackError::NotInTable {
                position: 9,
                len: 5
            })
        );
        assert_eq!(
            table.choose(&[0, 1], &[3], 1),
            Err(PackError::MustIncludeNotAvailable("x".into()))
        );
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
