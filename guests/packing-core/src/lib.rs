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

use std::cell::RefCell;
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

/// `Table::sole_node` of a position without NUMA node.
const NO_NODE: u32 = u32::MAX;
/// `Table::sole_node` of a position on more than one NUMA node.
const SEVERAL_NODES: u32 = u32::MAX - 1;

/// A device table prepared for packing: every comparison the packer makes
/// afterwards is between integers. IDs are ranked in ID order, link
/// groups in key order and NUMA nodes in number order once, here (each
/// distinct key hashed once, only the distinct keys sorted), and the
/// devices are listed by link group and the groups by NUMA node, so
/// choosing never compares a string and never sorts a device.
///
/// Build it once per device set and call [`Table::choose`] with positions
/// (what the `preferred-allocation-indexed` guest does), or let [`choose`]
/// build one per call from [`Item`]s.
///
/// NUMA nodes are numbered by index into `numa_nodes` here; "list" `i` is
/// NUMA node `i`, and list `numa_nodes.len()` stands for "no NUMA node".
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Every ID, concatenated; `spans[p]` is where position `p`'s is.
    id_text: String,
    spans: Vec<(u32, u32)>,
    /// For each position, the first position with the same ID.
    canonical: Vec<u32>,
    /// For each position, the rank of its ID in ID order.
    rank: Vec<u32>,
    /// Canonical positions in ID order (lookups by ID).
    by_id: Vec<u32>,
    /// The distinct NUMA node numbers, ascending.
    numa_nodes: Vec<i64>,
    /// Each position's NUMA nodes.
    numa: Lists,
    /// Position `p`'s NUMA node when it has exactly one (the common case,
    /// read without `numa`), else `NO_NODE` or `SEVERAL_NODES`.
    sole_node: Vec<u32>,
    /// For each position, its link group's rank in key order, or `NO_GROUP`.
    group: Vec<u32>,
    /// Each link group's canonical positions, in ID order.
    members: Lists,
    /// For each NUMA list, the link groups whose every member is on that
    /// node alone (on no node, for the last list), in key order.
    groups_on: Lists,
    /// The link groups that are not in `groups_on`: some member is on
    /// several NUMA nodes, or members are on different ones. Key order.
    spanning: Vec<u32>,
    /// For each NUMA list, the canonical positions without a link group on
    /// that node (once per distinct node), in ID order.
    lone_on: Lists,
    /// The working arrays of [`Table::choose`], kept between calls.
    scratch: RefCell<Scratch>,
}

impl Table {
    /// Prepares `items` (positions are indexes into it).
    pub fn new(items: &[Item<'_>]) -> Self {
        let n = items.len();
        let mut id_text = String::with_capacity(items.iter().map(|i| i.id.len()).sum());
        let mut spans = Vec::with_capacity(n);
        for item in items {
            let start = id_text.len() as u32;
            id_text.push_str(item.id);
            spans.push((start, id_text.len() as u32));
        }

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

        // NUMA nodes: the distinct numbers sorted, each position's as
        // indexes (each distinct node once).
        let mut numa_nodes: Vec<i64> = items
            .iter()
            .flat_map(|item| item.numa_nodes.iter().copied())
            .collect();
        numa_nodes.sort_unstable();
        numa_nodes.dedup();
        let no_numa = numa_nodes.len() as u32;
        let mut numa_pairs = Vec::with_capacity(n);
        for (p, item) in items.iter().enumerate() {
            let mut nodes: Vec<u32> = item
                .numa_nodes
                .iter()
                // Present: every item's nodes were collected above.
                .map(|node| numa_nodes.binary_search(node).unwrap_or_default() as u32)
                .collect();
            nodes.sort_unstable();
            nodes.dedup();
            numa_pairs.extend(nodes.into_iter().map(|node| (p as u32, node)));
        }
        let numa = Lists::new(n, &numa_pairs);
        let sole_node: Vec<u32> = (0..n)
            .map(|p| match numa.get(p) {
                [] => NO_NODE,
                [node] => *node,
                _ => SEVERAL_NODES,
            })
            .collect();
        // The NUMA list a canonical position is on alone, if one.
        let list_of = |p: u32| match sole_node[p as usize] {
            NO_NODE => Some(no_numa),
            SEVERAL_NODES => None,
            node => Some(node),
        };

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
        let groups = keys.len();
        let mut key_rank = vec![0; groups];
        for (rank, (_, id)) in keys.iter().enumerate() {
            key_rank[*id as usize] = rank as u32;
        }
        for g in &mut group {
            if *g != NO_GROUP {
                *g = key_rank[*g as usize];
            }
        }

        // Devices by link group; groups by the one NUMA list all their
        // members are on; devices without a group by each of their lists.
        let mut member_pairs = Vec::with_capacity(n);
        let mut lone_pairs = Vec::new();
        for &p in &by_id {
            match group_of(&group, p) {
                Some(g) => member_pairs.push((g as u32, p)),
                None => match list_of(p) {
                    Some(list) => lone_pairs.push((list, p)),
                    None => lone_pairs.extend(numa.get(p as usize).iter().map(|&node| (node, p))),
                },
            }
        }
        let members = Lists::new(groups, &member_pairs);
        let mut group_pairs = Vec::with_capacity(groups);
        let mut spanning = Vec::new();
        for g in 0..groups as u32 {
            let mut lists = members.get(g as usize).iter().map(|&p| list_of(p));
            let first = lists.next().flatten();
            match first.filter(|&list| lists.all(|other| other == Some(list))) {
                Some(list) => group_pairs.push((list, g)),
                None => spanning.push(g),
            }
        }
        let lists = numa_nodes.len() + 1;
        let groups_on = Lists::new(lists, &group_pairs);
        let lone_on = Lists::new(lists, &lone_pairs);

        Self {
            id_text,
            spans,
            canonical,
            rank,
            by_id,
            numa_nodes,
            numa,
            sole_node,
            group,
            members,
            groups_on,
            spanning,
            lone_on,
            scratch: RefCell::default(),
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

    /// How many link groups there are.
    fn groups(&self) -> usize {
        self.members.len()
    }

    /// Calls `f` with each of position `p`'s NUMA nodes.
    #[inline]
    fn for_each_node(&self, p: u32, mut f: impl FnMut(u32)) {
        match self.sole_node[p as usize] {
            NO_NODE => {}
            SEVERAL_NODES => self.numa.get(p as usize).iter().for_each(|&node| f(node)),
            node => f(node),
        }
    }

    /// Position `p`'s NUMA tier: the best rank (`node_rank`) of its NUMA
    /// nodes; without any, the last tier (one past the nodes).
    #[inline]
    fn tier(&self, p: u32, node_rank: &[u32]) -> u32 {
        let no_numa = self.numa_nodes.len() as u32;
        match self.sole_node[p as usize] {
            NO_NODE => no_numa,
            SEVERAL_NODES => self
                .numa
                .get(p as usize)
                .iter()
                .map(|&node| node_rank[node as usize])
                .min()
                .unwrap_or(no_numa),
            node => node_rank[node as usize],
        }
    }

    /// Chooses exactly `size` distinct positions from `available`,
    /// including every position of `must_include` (positions with the
    /// same ID count once; the first is answered); see the crate
    /// documentation for the preferences.
    ///
    /// `available` is read once; after that the work is per NUMA tier the
    /// answer reaches, in link groups rather than devices (each group's
    /// free devices are counted while `available` is read); only the
    /// NUMA nodes and one tier's groups are sorted, never a device. The
    /// working arrays are the table's, reused from call to call.
    pub fn choose(
        &self,
        available: &[u32],
        must_include: &[u32],
        size: usize,
    ) -> Result<Vec<u32>, PackError> {
        match self.scratch.try_borrow_mut() {
            Ok(mut scratch) => self.choose_in(&mut scratch, available, must_include, size),
            // Only a call from inside a call (none is made) finds it taken.
            Err(_) => self.choose_in(&mut Scratch::default(), available, must_include, size),
        }
    }

    fn choose_in(
        &self,
        scratch: &mut Scratch,
        available: &[u32],
        must_include: &[u32],
        size: usize,
    ) -> Result<Vec<u32>, PackError> {
        let n = self.len();
        let nodes = self.numa_nodes.len();
        let Scratch {
            state,
            per_node,
            free_in_group,
            affinity,
            node_order,
            node_rank,
            in_tier,
            touched,
            candidates,
        } = scratch;
        // Slices from here on: the loops below then keep each array's
        // address and length in registers.
        let state = refill(state, n, State::Out);
        let per_node = refill(per_node, nodes, NodeCount::default());
        let free_in_group = refill(free_in_group, self.groups(), 0);
        let affinity = refill(affinity, self.groups(), false);
        let in_tier = refill(in_tier, self.groups(), 0);
        let node_rank = refill(node_rank, nodes, 0);
        // The table's arrays the loop over `available` reads, as slices.
        let (canonical_of, group_of_position) = (self.canonical.as_slice(), self.group.as_slice());
        let canonical = |p: u32| {
            if (p as usize) < n {
                Ok(canonical_of[p as usize])
            } else {
                Err(PackError::NotInTable {
                    position: p,
                    len: n,
                })
            }
        };
        // Each distinct available device is marked free and counted on its
        // NUMA nodes and in its link group as it is first seen.
        let mut distinct = 0;
        for &p in available {
            let c = canonical(p)?;
            if state[c as usize] == State::Out {
                state[c as usize] = State::Free;
                distinct += 1;
                self.for_each_node(c, |node| per_node[node as usize].others += 1);
                if let Some(g) = group_of(group_of_position, c) {
                    free_in_group[g] += 1;
                }
            }
        }
        if distinct < size {
            return Err(PackError::NotEnoughDevices {
                available: distinct,
                size,
            });
        }
        // Must-include devices are chosen first; their link groups are
        // affine, and their NUMA nodes come first.
        let mut chosen: Vec<u32> = Vec::with_capacity(size);
        for &p in must_include {
            let c = canonical(p)?;
            match state[c as usize] {
                State::Out => {
                    return Err(PackError::MustIncludeNotAvailable(self.id(p).to_string()));
                }
                State::Free => {
                    state[c as usize] = State::Chosen;
                    chosen.push(c);
                    self.for_each_node(c, |node| {
                        let count = &mut per_node[node as usize];
                        count.others -= 1;
                        count.must += 1;
                    });
                    if let Some(g) = group_of(&self.group, c) {
                        free_in_group[g] -= 1;
                        affinity[g] = true;
                    }
                }
                State::Chosen => {}
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
        // devices first), then by the number of other available devices,
        // then by number.
        node_order.clear();
        node_order.extend(0..nodes as u32);
        node_order.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            (per_node[b].must, per_node[b].others)
                .cmp(&(per_node[a].must, per_node[a].others))
                .then_with(|| self.numa_nodes[a].cmp(&self.numa_nodes[b]))
        });
        for (rank, &node) in node_order.iter().enumerate() {
            node_rank[node as usize] = rank as u32;
        }

        // Tiers: a device's best-ranked NUMA node, in rank order; devices
        // without NUMA last. A tier's link groups are those wholly on its
        // node (their free devices counted above) and the spanning ones'
        // members in the tier; a device without a group is a group of its
        // own. `in_tier` holds each group's free devices in the tier.
        let lists = node_order.iter().copied().chain([nodes as u32]);
        for (tier, list) in lists.enumerate() {
            if remaining == 0 {
                break;
            }
            let tier = tier as u32;
            let free_here =
                |p: u32| state[p as usize] == State::Free && self.tier(p, node_rank) == tier;
            touched.clear();
            candidates.clear();
            for &g in self.groups_on.get(list as usize) {
                if free_in_group[g as usize] > 0 {
                    in_tier[g as usize] = free_in_group[g as usize];
                    touched.push(g);
                }
            }
            for &g in &self.spanning {
                let here = self.members.get(g as usize).iter();
                let count = here.filter(|&&p| free_here(p)).count() as u32;
                if count > 0 {
                    in_tier[g as usize] = count;
                    touched.push(g);
                }
            }
            touched.sort_unstable();
            for &p in self.lone_on.get(list as usize) {
                if free_here(p) {
                    candidates.push(Candidate {
                        size: 1,
                        group: None,
                        first_rank: self.rank[p as usize],
                        position: p,
                    });
                }
            }
            let take = |g: u32, remaining: &mut usize, chosen: &mut Vec<u32>| {
                let start = chosen.len();
                let members = self.members.get(g as usize).iter().copied();
                chosen.extend(members.filter(|&p| free_here(p)).take(*remaining));
                *remaining -= chosen.len() - start;
            };

            // Groups linked to what is already chosen come first, by key.
            for &g in touched.iter() {
                if remaining == 0 {
                    break;
                }
                if affinity[g as usize] {
                    take(g, &mut remaining, &mut chosen);
                    in_tier[g as usize] = 0;
                }
            }

            // Then best fit: sorted by (size, key, first ID), a device
            // without a group before groups of one (group keys are
            // distinct: their first IDs never decide).
            candidates.extend(
                touched
                    .iter()
                    .filter(|&&g| in_tier[g as usize] > 0)
                    .map(|&g| Candidate {
                        size: in_tier[g as usize],
                        group: Some(g),
                        first_rank: 0,
                        position: 0,
                    }),
            );
            candidates.sort_unstable_by_key(|c| (c.size, c.group, c.first_rank));
            while remaining > 0 && !candidates.is_empty() {
                let fits = candidates.partition_point(|c| (c.size as usize) < remaining);
                let pick = if fits < candidates.len() {
                    fits
                } else {
                    // None covers the rest: the biggest group (first of the
                    // biggest size, so the smallest key).
                    let biggest = candidates[candidates.len() - 1].size;
                    candidates.partition_point(|c| c.size < biggest)
                };
                let candidate = candidates.remove(pick);
                match candidate.group {
                    Some(g) => take(g, &mut remaining, &mut chosen),
                    None => {
                        chosen.push(candidate.position);
                        remaining -= 1;
                    }
                }
            }
            for &g in touched.iter() {
                in_tier[g as usize] = 0;
            }
        }
        Ok(chosen)
    }
}

/// Lists of `u32`s by index, stored flat: list `i` is
/// `items[start[i]..start[i + 1]]`.
#[derive(Clone, Debug, Default)]
struct Lists {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Lists {
    /// `lists` lists holding each `(list, item)` pair's item, each list in
    /// the pairs' order (a counting sort).
    fn new(lists: usize, pairs: &[(u32, u32)]) -> Self {
        let mut start = vec![0u32; lists + 1];
        for &(list, _) in pairs {
            start[list as usize + 1] += 1;
        }
        for i in 0..lists {
            start[i + 1] += start[i];
        }
        let mut items = vec![0; pairs.len()];
        let mut fill = start.clone();
        for &(list, item) in pairs {
            items[fill[list as usize] as usize] = item;
            fill[list as usize] += 1;
        }
        Self { start, items }
    }

    /// How many lists there are.
    fn len(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// List `i`.
    fn get(&self, i: usize) -> &[u32] {
        &self.items[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// The working arrays of one [`Table::choose`]: see there for what each
/// holds. Kept in the table so that calls after the first allocate only
/// their answer.
#[derive(Clone, Debug, Default)]
struct Scratch {
    state: Vec<State>,
    per_node: Vec<NodeCount>,
    free_in_group: Vec<u32>,
    affinity: Vec<bool>,
    node_order: Vec<u32>,
    node_rank: Vec<u32>,
    in_tier: Vec<u32>,
    touched: Vec<u32>,
    candidates: Vec<Candidate>,
}

/// Makes `v` `len` copies of `value` (a fill, without allocating, once it
/// has the length).
fn refill<T: Copy>(v: &mut Vec<T>, len: usize, value: T) -> &mut [T] {
    v.resize(len, value);
    v.fill(value);
    v
}

/// Devices available on one NUMA node during one [`Table::choose`].
#[derive(Clone, Copy, Debug, Default)]
struct NodeCount {
    /// Must-include devices.
    must: usize,
    /// Other available devices.
    others: usize,
}

/// Where a canonical position stands during one [`Table::choose`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Not available.
    Out,
    /// Available, not chosen yet.
    Free,
    /// Chosen (a must-include device).
    Chosen,
}

/// Position `p`'s link group, if it has one.
fn group_of(group: &[u32], p: u32) -> Option<usize> {
    match group[p as usize] {
        NO_GROUP => None,
        g => Some(g as usize),
    }
}

/// A link group (or a lone device) of one NUMA tier, for best fit.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    /// Its free devices in the tier.
    size: u32,
    /// The group's rank in key order; `None` for a lone device.
    group: Option<u32>,
    /// The rank of a lone device's ID (unused for a group).
    first_rank: u32,
    /// The lone device's position (unused for a group).
    position: u32,
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
    fn a_group_across_numa_nodes_is_split_by_tier() {
        // Switch "sw" has two devices on node 0 and three on node 1;
        // node 1 has more devices, so it is the first tier, and only the
        // switch's node-1 devices count there.
        let devices = [
            item("a0", &[0], Some("sw")),
            item("a1", &[0], Some("sw")),
            item("b0", &[1], Some("sw")),
            item("b1", &[1], Some("sw")),
            item("b2", &[1], Some("sw")),
            item("b3", &[1], None),
        ];
        assert_eq!(choose(&devices, &[], 3).unwrap(), ["b0", "b1", "b2"]);
        // Best fit inside node 1: the lone device covers one.
        assert_eq!(choose(&devices, &[], 1).unwrap(), ["b3"]);
        // Past node 1, the switch's node-0 devices.
        assert_eq!(
            choose(&devices, &[], 5).unwrap(),
            ["b0", "b1", "b2", "b3", "a0"]
        );
        // A must-include device on node 0 puts node 0 first, and its
        // switch is affine there only.
        assert_eq!(choose(&devices, &["a1"], 3).unwrap(), ["a1", "a0", "b0"]);
    }

    #[test]
    fn a_device_on_several_numa_nodes_counts_on_its_best_one() {
        let devices = [
            item("x", &[0, 1], None),
            item("n0", &[0], None),
            item("n1a", &[1], None),
            item("n1b", &[1], None),
        ];
        // Node 1 has three devices (x counts on both), node 0 two: x is
        // in node 1's tier and is not offered again in node 0's.
        assert_eq!(choose(&devices, &[], 3).unwrap(), ["n1a", "n1b", "x"]);
        assert_eq!(choose(&devices, &[], 4).unwrap(), ["n1a", "n1b", "x", "n0"]);
        // A device listing one node twice is still one device.
        let twice = [item("y", &[2, 2], None), item("z", &[3], None)];
        assert_eq!(choose(&twice, &[], 2).unwrap(), ["y", "z"]);
    }

    #[test]
    fn a_kept_table_answers_each_call_on_its_own_request() {
        // The table's working arrays are reused: a call must not see the
        // previous call's available devices, must-includes or groups.
        let devices = [
            item("g0", &[0], Some("big")),
            item("g1", &[0], Some("big")),
            item("g2", &[0], Some("big")),
            item("s0", &[1], Some("small")),
            item("s1", &[1], Some("small")),
        ];
        let table = Table::new(&devices);
        assert_eq!(table.choose(&[0, 1, 2, 3, 4], &[3], 2).unwrap(), [3, 4]);
        assert_eq!(table.choose(&[0, 1, 2], &[], 2).unwrap(), [0, 1]);
        assert_eq!(
            table.choose(&[3, 4], &[], 3),
            Err(PackError::NotEnoughDevices {
                available: 2,
                size: 3
            })
        );
        assert_eq!(table.choose(&[0, 1, 2, 3, 4], &[], 2).unwrap(), [0, 1]);
        // Node 1 now has more free devices than node 0.
        assert_eq!(table.choose(&[2, 3, 4], &[], 1).unwrap(), [3]);
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
