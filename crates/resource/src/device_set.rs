//! The device set of one resource as the kubelet sees it: every advertised
//! ID with its health and NUMA nodes, built from discovery's devices and
//! health's verdicts. Immutable once built; a change is a new set swapped
//! in whole. The device plugin turns it into `ListAndWatch` messages.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::{DefaultHashBuilder, HashTable};

use wdp_hardware::Candidate;
use wdp_policy::types::{Device, DeviceNode, DeviceRef, Verdict};

use crate::convert::guest_node;
use crate::dra_layout::DraExtras;
use crate::withholding::Withholding;

/// Finds a resource's candidates by ID: a map of them, or the pipeline's
/// view over the latest scan and the candidates seen before.
pub trait CandidateLookup {
    /// The candidate with `id`, if known.
    fn candidate(&self, id: &str) -> Option<&Candidate>;
}

impl CandidateLookup for BTreeMap<String, Candidate> {
    fn candidate(&self, id: &str) -> Option<&Candidate> {
        self.get(id)
    }
}

/// Separator between a shared device's ID and its replica number.
pub(crate) const REPLICA_SEPARATOR: &str = "::";

/// One device ID as advertised to the kubelet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedDevice {
    /// What a guest sees of it: the kubelet's ID (`<device>::<n>` for
    /// replicas), the device it belongs to, NUMA nodes, attributes and the
    /// device nodes of its candidates (host paths).
    pub device: DeviceRef,
    /// Whether the kubelet may hand it out.
    pub healthy: bool,
    /// Why it is unhealthy (free text; empty when healthy).
    pub reason: String,
    /// IDs of the candidates the device is made of; `None` for the
    /// commonest case, one candidate whose ID is the device's (built-in
    /// discovery), which then costs nothing per device.
    candidates: Option<Box<[Box<str>]>>,
}

impl AdvertisedDevice {
    /// A device made of `candidates` (IDs).
    pub fn new(device: DeviceRef, healthy: bool, reason: String, candidates: &[String]) -> Self {
        let own = matches!(candidates, [only] if *only == device.device_id);
        Self {
            candidates: (!own).then(|| candidates.iter().map(|c| c.as_str().into()).collect()),
            device,
            healthy,
            reason,
        }
    }

    /// The kubelet's ID.
    pub fn id(&self) -> &str {
        &self.device.id
    }

    /// IDs of the candidates the device is made of.
    pub fn candidates(&self) -> Vec<String> {
        match &self.candidates {
            None => vec![self.device.device_id.clone()],
            Some(listed) => listed.iter().map(|c| c.to_string()).collect(),
        }
    }
}

/// Everything one resource advertises at one moment.
///
/// Two sets are equal when they advertise the same; their
/// [`generation`](Self::generation)s are not compared.
#[derive(Clone, Debug, Default)]
pub struct DeviceSet {
    /// Sorted by ID, unique.
    devices: Vec<AdvertisedDevice>,
    /// Positions in `devices`, hashed by ID: how every RPC finds the IDs
    /// the kubelet names (a 1,024-ID request: one hash and one comparison
    /// per ID, where a binary search made ten string comparisons). About
    /// 10 bytes per device.
    index: PositionIndex,
    /// Companion nodes every container of the resource receives.
    companions: Vec<DeviceNode>,
    /// Unique in the process for every set built.
    generation: u64,
    /// The DRA-only layout and taints (empty off DRA).
    dra: Arc<DraExtras>,
    /// Devices not offered for now, whatever their health.
    withholding: Arc<Withholding>,
}

impl PartialEq for DeviceSet {
    fn eq(&self, other: &Self) -> bool {
        self.devices == other.devices
            && self.companions == other.companions
            && self.dra == other.dra
            && self.withholding == other.withholding
    }
}

impl Eq for DeviceSet {}

/// Positions of a device list, found by ID through a hash table that
/// stores only the positions (the IDs stay in the list).
#[derive(Clone, Default)]
struct PositionIndex {
    table: HashTable<u32>,
    hasher: DefaultHashBuilder,
}

impl std::fmt::Debug for PositionIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PositionIndex")
            .field("len", &self.table.len())
            .finish()
    }
}

impl PositionIndex {
    /// The index of `devices` (unique IDs; at most
    /// `MAX_DEVICES_PER_RESOURCE`, so a position fits `u32`).
    fn of(devices: &[AdvertisedDevice]) -> Self {
        let hasher = DefaultHashBuilder::default();
        let mut table = HashTable::with_capacity(devices.len());
        for (position, device) in devices.iter().enumerate() {
            let hash = hasher.hash_one(device.id());
            table.insert_unique(hash, position as u32, |&p| {
                hasher.hash_one(devices[p as usize].id())
            });
        }
        Self { table, hasher }
    }

    /// Where `id` is in `devices` (the list the index was built from).
    fn find(&self, devices: &[AdvertisedDevice], id: &str) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(id), |&p| {
                devices[p as usize].id() == id
            })
            .map(|&p| p as usize)
    }
}

/// The source of [`DeviceSet::generation`]s.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// The kubelet's health word (`Healthy` or `Unhealthy`), as its
/// `ListAndWatch` message carries it.
fn health_word(healthy: bool) -> &'static str {
    if healthy { "Healthy" } else { "Unhealthy" }
}

/// Encoded length of a non-empty string field (empty strings are not sent).
fn string_len(tag: u32, value: &str) -> usize {
    if value.is_empty() {
        0
    } else {
        delimited_len(tag, value.len())
    }
}

/// Encoded length of a length-delimited field of `len` bytes.
fn delimited_len(tag: u32, len: usize) -> usize {
    use prost::encoding::{encoded_len_varint, key_len};
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// Encoded length of a device's `TopologyInfo` field (3): one `NUMANode`
/// (an `int64 ID`, absent when 0) per node; no field without nodes.
fn topology_len(numa_nodes: &[i64]) -> usize {
    use prost::encoding::{encoded_len_varint, key_len};
    if numa_nodes.is_empty() {
        return 0;
    }
    let nodes: usize = numa_nodes
        .iter()
        .map(|&id| {
            let node = if id == 0 {
                0
            } else {
                key_len(1) + encoded_len_varint(id as u64)
            };
            delimited_len(1, node)
        })
        .sum();
    delimited_len(3, nodes)
}

/// The shared handle `ListAndWatch` streams and RPCs read.
pub type SharedDeviceSet = Arc<DeviceSet>;

/// How many kubelet IDs `devices` expand into (replicas counted), computed
/// without building anything; saturates instead of overflowing.
pub(crate) fn advertised_count(devices: &[Device]) -> usize {
    devices.iter().fold(0usize, |total, d| {
        total.saturating_add(usize::try_from(d.replicas.max(1)).unwrap_or(usize::MAX))
    })
}

impl DeviceSet {
    /// Expands `devices` with their verdicts into kubelet device IDs,
    /// sorted. The caller bounds the count first (`advertised_count`); a
    /// device without a verdict is healthy.
    pub fn build(
        devices: &[Device],
        verdicts: &BTreeMap<String, Verdict>,
        candidates: &impl CandidateLookup,
    ) -> Self {
        let mut advertised = Vec::with_capacity(advertised_count(devices));
        for device in devices {
            let (healthy, reason) = verdicts
                .get(&device.id)
                .map_or((true, String::new()), |v| (v.healthy, v.reason.clone()));
            let mut nodes = Vec::new();
            for c in device
                .candidates
                .iter()
                .filter_map(|id| candidates.candidate(id))
            {
                for n in &c.nodes {
                    let node = guest_node(n);
                    if !nodes.contains(&node) {
                        nodes.push(node);
                    }
                }
            }
            let mut push = |id: String| {
                advertised.push(AdvertisedDevice::new(
                    DeviceRef {
                        id,
                        device_id: device.id.clone(),
                        numa_nodes: device.numa_nodes.clone(),
                        attributes: device.attributes.clone(),
                        nodes: nodes.clone(),
                    },
                    healthy,
                    reason.clone(),
                    &device.candidates,
                ));
            };
            if device.replicas <= 1 {
                push(device.id.clone());
            } else {
                for n in 0..device.replicas {
                    push(format!("{}{REPLICA_SEPARATOR}{n}", device.id));
                }
            }
        }
        advertised.sort_by(|a, b| a.device.id.cmp(&b.device.id));
        Self {
            index: PositionIndex::of(&advertised),
            devices: advertised,
            companions: Vec::new(),
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            dra: Arc::default(),
            withholding: Arc::default(),
        }
    }

    /// The same set with `withholding` (replacing any before).
    pub fn with_withholding(mut self, withholding: Arc<Withholding>) -> Self {
        self.withholding = withholding;
        self
    }

    /// The devices withheld for now ([`Withholding`](crate::Withholding)).
    pub fn withholding(&self) -> &Arc<Withholding> {
        &self.withholding
    }

    /// Whether `device` is offered: healthy and not withheld.
    pub fn offers(&self, device: &AdvertisedDevice) -> bool {
        device.healthy && !self.withholding.withholds(&device.device.device_id)
    }

    /// The same set with these DRA-only facts (layout and taints).
    pub fn with_dra(mut self, dra: Arc<DraExtras>) -> Self {
        self.dra = dra;
        self
    }

    /// The DRA-only facts: partitions, counters, capacity, guest taints
    /// (empty off DRA, or without the `dra-layout` and `device-taints`
    /// hooks).
    pub fn dra(&self) -> &Arc<DraExtras> {
        &self.dra
    }

    /// A number no other set built in this process has (0 for an empty
    /// default set): warm guest instances and the device tables guests
    /// receive are kept per generation.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The same set with `companions` given to every container.
    pub fn with_companions(mut self, companions: Vec<DeviceNode>) -> Self {
        self.companions = companions;
        self
    }

    /// Companion nodes every container of the resource receives.
    pub fn companions(&self) -> &[DeviceNode] {
        &self.companions
    }

    /// Every advertised device, sorted by ID.
    pub fn devices(&self) -> &[AdvertisedDevice] {
        &self.devices
    }

    /// The device with kubelet ID `id`.
    pub fn get(&self, id: &str) -> Option<&AdvertisedDevice> {
        self.position(id).map(|i| &self.devices[i])
    }

    /// Where the device with kubelet ID `id` is in
    /// [`devices`](Self::devices).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.index.find(&self.devices, id)
    }

    /// How many IDs are advertised.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// Whether nothing is advertised.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

    /// How many advertised IDs are healthy.
    pub fn healthy_count(&self) -> usize {
        self.devices.iter().filter(|d| d.healthy).count()
    }

    /// The encoded size of the kubelet's `ListAndWatch` message for this
    /// set (each device's ID, health word and NUMA nodes), computed without
    /// building it (no copy of any ID): what the kubelet's message limit is
    /// checked against on every refresh.
    pub fn list_encoded_len(&self) -> usize {
        self.devices
            .iter()
            .map(|d| {
                let device = string_len(1, &d.device.id)
                    + string_len(2, health_word(d.healthy))
                    + topology_len(&d.device.numa_nodes);
                delimited_len(1, device)
            })
            .sum()
    }

    /// The devices this set was built from, replicas counted back from
    /// their IDs: what [`build`](Self::build) turns into the same set
    /// again (in order of their first ID, not discovery's order).
    pub fn devices_advertised(&self) -> Vec<Device> {
        let mut devices: Vec<Device> = Vec::new();
        let mut position: HashMap<&str, usize> = HashMap::new();
        for d in &self.devices {
            match position.get(d.device.device_id.as_str()) {
                Some(&i) => devices[i].replicas += 1,
                None => {
                    position.insert(&d.device.device_id, devices.len());
                    devices.push(Device {
                        id: d.device.device_id.clone(),
                        candidates: d.candidates(),
                        numa_nodes: d.device.numa_nodes.clone(),
                        attributes: d.device.attributes.clone(),
                        replicas: 1,
                    });
                }
            }
        }
        devices
    }

    /// The health verdict of every device ([`devices_advertised`](Self::devices_advertised)),
    /// by device ID.
    pub fn verdicts(&self) -> HashMap<&str, Verdict> {
        let mut verdicts = HashMap::new();
        for d in &self.devices {
            verdicts
                .entry(d.device.device_id.as_str())
                .or_insert_with(|| Verdict {
                    id: d.device.device_id.clone(),
                    healthy: d.healthy,
                    reason: d.reason.clone(),
                });
        }
        verdicts
    }

    /// Looks up every ID of a kubelet request, refusing unknown and
    /// repeated IDs, and unhealthy or withheld ones when `require_healthy`.
    /// The error names the ID.
    pub fn resolve<'a>(
        &'a self,
        ids: &[String],
        require_healthy: bool,
    ) -> Result<Vec<&'a AdvertisedDevice>, String> {
        Ok(self
            .resolve_indexes(ids, require_healthy)?
            .into_iter()
            .map(|i| &self.devices[i as usize])
            .collect())
    }

    /// As [`resolve`](Self::resolve), answering positions in
    /// [`devices`](Self::devices) (ID order, so sorting positions sorts
    /// by ID).
    pub fn resolve_indexes(
        &self,
        ids: &[String],
        require_healthy: bool,
    ) -> Result<Vec<u32>, String> {
        self.checked_indexes(ids, require_healthy, require_healthy)
    }

    /// As [`resolve`](Self::resolve) requiring health but not that the
    /// devices be offered: for devices a container holds already
    /// (`PreStartContainer` of a container the kubelet gave them to, which
    /// a withholding must not stop from starting again).
    pub fn resolve_held<'a>(&'a self, ids: &[String]) -> Result<Vec<&'a AdvertisedDevice>, String> {
        Ok(self
            .checked_indexes(ids, true, false)?
            .into_iter()
            .map(|i| &self.devices[i as usize])
            .collect())
    }

    fn checked_indexes(
        &self,
        ids: &[String],
        require_healthy: bool,
        require_offered: bool,
    ) -> Result<Vec<u32>, String> {
        let indexes = ids
            .iter()
            .map(|id| {
                let index = self
                    .position(id)
                    .ok_or_else(|| format!("unknown device {id:?}"))?;
                let device = &self.devices[index];
                if require_healthy && !device.healthy {
                    return Err(format!(
                        "device {id:?} is unhealthy: {}",
                        if device.reason.is_empty() {
                            "no reason given"
                        } else {
                            &device.reason
                        }
                    ));
                }
                if require_offered && self.withholding.withholds(&device.device.device_id) {
                    return Err(format!(
                        "device {id:?} is withheld: {}",
                        self.withholding.reason
                    ));
                }
                // At most MAX_DEVICES_PER_RESOURCE devices: fits u32.
                Ok(index as u32)
            })
            .collect::<Result<Vec<u32>, String>>()?;
        // Duplicates by sorting a copy: sized by the request, not the set
        // (no per-device allocation on every call of a 65,000-device
        // resource), and a few microseconds at 1,024 IDs where a tree set
        // took about a hundred.
        let mut sorted = indexes.clone();
        sorted.sort_unstable();
        if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
            let id = &self.devices[twice[0] as usize].device.id;
            return Err(format!("device {id:?} is listed twice"));
        }
        Ok(indexes)
    }
}

/// How one device's health differs from the set before, as the log tells
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HealthChange<'a> {
    /// Unhealthy now, and healthy before, unhealthy for another reason,
    /// or not there.
    Unhealthy {
        /// The kubelet ID.
        id: &'a str,
        /// Why (free text; may be empty).
        reason: &'a str,
    },
    /// Healthy again after being unhealthy.
    Recovered {
        /// The kubelet ID.
        id: &'a str,
    },
}

/// The health changes from `before` to `after`, in ID order: every device
/// of `after` that is unhealthy and was not so for the same reason, and
/// every device healthy again. Devices that came healthy or left are not
/// health changes.
pub(crate) fn health_changes<'a>(
    before: &DeviceSet,
    after: &'a DeviceSet,
) -> Vec<HealthChange<'a>> {
    after
        .devices()
        .iter()
        .filter_map(|device| {
            let earlier = before.get(device.id());
            match (earlier, device.healthy) {
                (Some(earlier), false) if !earlier.healthy && earlier.reason == device.reason => {
                    None
                }
                (_, false) => Some(HealthChange::Unhealthy {
                    id: device.id(),
                    reason: &device.reason,
                }),
                (Some(earlier), true) if !earlier.healthy => {
                    Some(HealthChange::Recovered { id: device.id() })
                }
                (_, true) => None,
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "device_set_tests.rs"]
mod tests;
