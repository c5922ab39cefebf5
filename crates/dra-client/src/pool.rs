//! A pool's whole content: its devices and the counter sets they share.
//!
//! Partitions of one physical device (KEP-4815) are published as devices
//! that consume counters of a counter set, so the scheduler never hands out
//! more of the device than it has. [`counter_groups`] finds which counter
//! sets and devices are tied together by consumption: on a 1.34 API server
//! each group has to travel in one ResourceSlice.

use std::collections::{BTreeMap, BTreeSet};

use crate::device::DraDevice;

/// A named set of counters that devices of the pool consume from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CounterSet {
    /// The set's name, a DNS label unique in the pool.
    pub name: String,
    /// Counter name (a DNS label) → the quantity available (`"40Gi"`).
    pub counters: BTreeMap<String, String>,
}

impl CounterSet {
    /// A counter set named `name` with `counters` (name → quantity).
    pub fn new<K, V>(name: impl Into<String>, counters: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            name: name.into(),
            counters: counters
                .into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        }
    }
}

/// Everything one pool publishes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolContent {
    /// The devices, whole ones and partitions alike.
    pub devices: Vec<DraDevice>,
    /// The counter sets the devices consume from.
    pub counter_sets: Vec<CounterSet>,
}

impl PoolContent {
    /// A pool of whole devices only.
    pub fn from_devices(devices: Vec<DraDevice>) -> Self {
        Self {
            devices,
            counter_sets: Vec::new(),
        }
    }
}

impl From<Vec<DraDevice>> for PoolContent {
    fn from(devices: Vec<DraDevice>) -> Self {
        Self::from_devices(devices)
    }
}

/// Counter sets and the devices consuming them that must share a slice on a
/// 1.34 server: connected by consumption, directly or through other devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CounterGroup {
    /// Indexes into `counter_sets`, ascending by set name.
    pub sets: Vec<usize>,
    /// Indexes into `devices`, ascending by device name.
    pub devices: Vec<usize>,
}

/// The groups of `content` (see [`CounterGroup`]), ordered by their first
/// set's name. Every counter set is in exactly one group, consumed or not; a
/// device is in the group of the sets it consumes (consumptions naming no
/// set of the pool are ignored); devices consuming nothing are in none.
pub(crate) fn counter_groups(content: &PoolContent) -> Vec<CounterGroup> {
    counter_groups_of(&content.devices, &content.counter_sets)
}

/// [`counter_groups`] of a pool given as its parts.
pub(crate) fn counter_groups_of(
    devices: &[DraDevice],
    counter_sets: &[CounterSet],
) -> Vec<CounterGroup> {
    let content = Parts {
        devices,
        counter_sets,
    };
    let index_of: BTreeMap<&str, usize> = content
        .counter_sets
        .iter()
        .enumerate()
        .map(|(index, set)| (set.name.as_str(), index))
        .collect();
    // Union-find over the counter sets.
    let mut parent: Vec<usize> = (0..content.counter_sets.len()).collect();
    fn root(parent: &mut [usize], mut node: usize) -> usize {
        while parent[node] != node {
            parent[node] = parent[parent[node]];
            node = parent[node];
        }
        node
    }
    for device in content.devices {
        let mut consumed = device
            .consumes_counters
            .iter()
            .filter_map(|consumption| index_of.get(consumption.counter_set.as_str()).copied());
        if let Some(first) = consumed.next() {
            for other in consumed {
                let (a, b) = (root(&mut parent, first), root(&mut parent, other));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut groups: BTreeMap<usize, (Members<'_>, Members<'_>)> = BTreeMap::new();
    for (index, set) in content.counter_sets.iter().enumerate() {
        let group = root(&mut parent, index);
        groups
            .entry(group)
            .or_default()
            .0
            .insert((set.name.as_str(), index));
    }
    for (index, device) in content.devices.iter().enumerate() {
        let first = device
            .consumes_counters
            .iter()
            .find_map(|consumption| index_of.get(consumption.counter_set.as_str()).copied());
        if let Some(set) = first {
            let group = root(&mut parent, set);
            groups
                .entry(group)
                .or_default()
                .1
                .insert((device.name.as_str(), index));
        }
    }
    let mut groups: Vec<CounterGroup> = groups
        .into_values()
        .map(|(sets, devices)| CounterGroup {
            sets: sets.into_iter().map(|(_, index)| index).collect(),
            devices: devices.into_iter().map(|(_, index)| index).collect(),
        })
        .collect();
    groups.sort_by(|a, b| {
        let first = |group: &CounterGroup| {
            group
                .sets
                .first()
                .map(|&index| content.counter_sets[index].name.clone())
        };
        first(a).cmp(&first(b))
    });
    groups
}

/// (name, index) pairs, in name order.
type Members<'a> = BTreeSet<(&'a str, usize)>;

struct Parts<'a> {
    devices: &'a [DraDevice],
    counter_sets: &'a [CounterSet],
}
