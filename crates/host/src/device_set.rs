//! The device set of one resource as the kubelet sees it: every advertised
//! ID with its health, built from discovery's devices and health's
//! verdicts. Immutable once built; a change is a new set swapped in whole.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::{DefaultHashBuilder, HashTable};

use wdp_hardware::Candidate;
use wdp_kubelet_api::v1beta1::{self, ListAndWatchResponse, NumaNode, TopologyInfo};
use wdp_policy::types::{Device, DeviceNode, DeviceRef, Verdict};

use crate::convert::guest_node;

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
pub const REPLICA_SEPARATOR: &str = "::";

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
}

impl PartialEq for DeviceSet {
    fn eq(&self, other: &Self) -> bool {
        self.devices == other.devices && self.companions == other.companions
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

/// The kubelet's health word.
fn health_word(healthy: bool) -> &'static str {
    if healthy {
        v1beta1::HEALTHY
    } else {
        v1beta1::UNHEALTHY
    }
}

/// A device's NUMA nodes as the kubelet's topology (none when unknown).
fn topology(d: &AdvertisedDevice) -> Option<TopologyInfo> {
    (!d.device.numa_nodes.is_empty()).then(|| TopologyInfo {
        nodes: d
            .device
            .numa_nodes
            .iter()
            .map(|&id| NumaNode { id })
            .collect(),
    })
}

/// Encoded length of a non-empty string field (empty strings are not sent).
fn string_len(tag: u32, value: &str) -> usize {
    use prost::encoding::{encoded_len_varint, key_len};
    if value.is_empty() {
        0
    } else {
        key_len(tag) + encoded_len_varint(value.len() as u64) + value.len()
    }
}

/// The shared handle `ListAndWatch` streams and RPCs read.
pub type SharedDeviceSet = Arc<DeviceSet>;

/// How many kubelet IDs `devices` expand into (replicas counted), computed
/// without building anything; saturates instead of overflowing.
pub fn advertised_count(devices: &[Device]) -> usize {
    devices.iter().fold(0usize, |total, d| {
        total.saturating_add(usize::try_from(d.replicas.max(1)).unwrap_or(usize::MAX))
    })
}

impl DeviceSet {
    /// Expands `devices` with their verdicts into kubelet device IDs,
    /// sorted. The caller bounds the count first ([`advertised_count`]); a
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
        }
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

    /// The `ListAndWatch` message for this set.
    pub fn to_list(&self) -> ListAndWatchResponse {
        ListAndWatchResponse {
            devices: self
                .devices
                .iter()
                .map(|d| v1beta1::Device {
                    id: d.device.id.clone(),
                    health: health_word(d.healthy).to_owned(),
                    topology: topology(d),
                })
                .collect(),
        }
    }

    /// The encoded size of [`to_list`](Self::to_list)'s message, computed
    /// without building it (no copy of any ID): what the kubelet's message
    /// limit is checked against on every refresh.
    pub fn list_encoded_len(&self) -> usize {
        use prost::encoding::{encoded_len_varint, key_len, message, string};
        self.devices
            .iter()
            .map(|d| {
                let topology = topology(d).map_or(0, |t| message::encoded_len(3, &t));
                let device = string::encoded_len(1, &d.device.id)
                    + string_len(2, health_word(d.healthy))
                    + topology;
                key_len(1) + encoded_len_varint(device as u64) + device
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
    /// repeated IDs, and unhealthy ones when `require_healthy`. The error
    /// names the ID.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_expand_into_suffixed_ids() {
        let device = Device {
            id: "fuse".into(),
            replicas: 3,
            ..Device::default()
        };
        assert_eq!(advertised_count(std::slice::from_ref(&device)), 3);
        let set = DeviceSet::build(&[device], &BTreeMap::new(), &BTreeMap::new());
        let ids: Vec<&str> = set.devices().iter().map(|d| d.id()).collect();
        assert_eq!(ids, ["fuse::0", "fuse::1", "fuse::2"]);
        assert!(set.to_list().devices.iter().all(|d| d.health == "Healthy"));
    }

    #[test]
    fn a_request_resolves_in_its_own_order_and_duplicates_are_refused_by_name() {
        let devices: Vec<Device> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|id| Device {
                id: id.into(),
                ..Device::default()
            })
            .collect();
        let verdicts = BTreeMap::from([(
            "d".to_owned(),
            Verdict {
                id: "d".into(),
                healthy: false,
                reason: "hot".into(),
            },
        )]);
        let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
        let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            set.resolve_indexes(&ids(&["c", "a", "b"]), true),
            Ok(vec![2, 0, 1])
        );
        assert_eq!(
            set.resolve_indexes(&ids(&["c", "a", "c"]), true),
            Err("device \"c\" is listed twice".to_owned())
        );
        assert_eq!(
            set.resolve_indexes(&ids(&["a", "zz"]), true),
            Err("unknown device \"zz\"".to_owned())
        );
        assert_eq!(
            set.resolve_indexes(&ids(&["d"]), true),
            Err("device \"d\" is unhealthy: hot".to_owned())
        );
        assert_eq!(set.resolve_indexes(&ids(&["d"]), false), Ok(vec![3]));
    }

    #[test]
    fn every_id_is_found_at_its_sorted_position_and_no_other_id_is() {
        // PCI-like IDs sharing long prefixes, plus replicas of one device.
        let mut devices: Vec<Device> = (0..2000)
            .map(|i| Device {
                id: format!("0000:{:02x}:{:02x}.0", i / 32, i % 32),
                ..Device::default()
            })
            .collect();
        devices.push(Device {
            id: "0000:00:00.0-shared".into(),
            replicas: 4,
            ..Device::default()
        });
        let set = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(set.len(), 2004);
        for (position, device) in set.devices().iter().enumerate() {
            assert_eq!(set.position(device.id()), Some(position), "{}", device.id());
        }
        for unknown in [
            "",
            "0000:00:00",
            "0000:00:00.0-shared",
            "0000:3f:1f.0",
            "0000:00:00.0::0",
        ] {
            assert_eq!(set.position(unknown), None, "{unknown:?}");
        }
        assert_eq!(DeviceSet::default().position("anything"), None);
    }

    #[test]
    fn encoded_length_is_that_of_the_message() {
        let devices: Vec<Device> = (0..300)
            .map(|i| Device {
                id: format!("dev{i}"),
                numa_nodes: if i % 3 == 0 {
                    vec![0, i64::from(i)]
                } else {
                    vec![]
                },
                ..Device::default()
            })
            .collect();
        let verdicts = BTreeMap::from([(
            "dev7".to_owned(),
            Verdict {
                id: "dev7".into(),
                healthy: false,
                reason: "hot".into(),
            },
        )]);
        let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
        use prost::Message;
        assert_eq!(set.list_encoded_len(), set.to_list().encoded_len());
        assert_eq!(DeviceSet::default().list_encoded_len(), 0);
    }

    #[test]
    fn devices_and_verdicts_read_back_from_a_set_build_it_again() {
        let device = |id: &str, candidates: &[&str], replicas: u32| Device {
            id: id.into(),
            candidates: candidates.iter().map(|c| c.to_string()).collect(),
            numa_nodes: vec![1],
            attributes: vec![("k".into(), id.into())],
            replicas,
        };
        let devices = [
            device("own", &["own"], 1),
            device("pair", &["c1", "c2"], 1),
            device("other", &["c3"], 1),
            device("none", &[], 1),
            device("shared", &["shared"], 3),
        ];
        let verdicts = BTreeMap::from([(
            "shared".to_owned(),
            Verdict {
                id: "shared".into(),
                healthy: false,
                reason: "hot".into(),
            },
        )]);
        let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
        let again = set.devices_advertised();
        assert_eq!(again.len(), devices.len());
        for d in &devices {
            assert!(again.contains(d), "{d:?} missing from {again:?}");
        }
        let read: BTreeMap<String, Verdict> = set
            .verdicts()
            .into_iter()
            .map(|(id, v)| (id.to_owned(), v))
            .collect();
        assert_eq!(read.len(), devices.len());
        assert!(!read["shared"].healthy);
        assert_eq!(read["shared"].reason, "hot");
        assert!(read["own"].healthy);
        assert_eq!(DeviceSet::build(&again, &read, &BTreeMap::new()), set);
        assert_eq!(set.get("pair").unwrap().candidates(), ["c1", "c2"]);
        assert_eq!(set.get("own").unwrap().candidates(), ["own"]);
        assert!(set.get("none").unwrap().candidates().is_empty());
    }

    #[test]
    fn counts_saturate_instead_of_overflowing() {
        let huge = Device {
            id: "x".into(),
            replicas: u32::MAX,
            ..Device::default()
        };
        let many = vec![huge; 8];
        assert!(advertised_count(&many) >= 8 * u32::MAX as usize);
    }

    #[test]
    fn every_build_is_a_new_generation_but_equal_sets_compare_equal() {
        let devices = [
            Device {
                id: "b".into(),
                ..Device::default()
            },
            Device {
                id: "a".into(),
                ..Device::default()
            },
        ];
        let one = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
        let two = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
        assert_ne!(one.generation(), two.generation());
        assert_eq!(one, two);
        // Positions follow ID order.
        let ids = ["b".to_owned(), "a".to_owned()];
        assert_eq!(one.resolve_indexes(&ids, true).unwrap(), [1, 0]);
    }

    #[test]
    fn resolve_names_the_bad_id() {
        let device = Device {
            id: "a".into(),
            ..Device::default()
        };
        let verdicts = BTreeMap::from([(
            "a".to_owned(),
            Verdict {
                id: "a".into(),
                healthy: false,
                reason: "too hot".into(),
            },
        )]);
        let set = DeviceSet::build(&[device], &verdicts, &BTreeMap::new());
        let err = set.resolve(&["b".into()], false).unwrap_err();
        assert!(err.contains("\"b\""), "{err}");
        let err = set.resolve(&["a".into()], true).unwrap_err();
        assert!(err.contains("too hot"), "{err}");
        assert!(set.resolve(&["a".into(), "a".into()], false).is_err());
    }
}
