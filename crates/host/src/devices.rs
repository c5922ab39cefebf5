//! The device set of one resource as the kubelet sees it, and the built-in
//! policies that apply when no guest implements a hook.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use wdp_hardware::{Candidate, DeviceNode};
use wdp_kubelet_api::v1beta1::{
    self, ContainerAllocateResponse, DeviceSpec, ListAndWatchResponse, NumaNode, TopologyInfo,
};

use crate::config::MAX_DEVICE_ID_LEN;

/// Separator between a shared device's ID and its replica number.
pub const REPLICA_SEPARATOR: &str = "::";

/// A device before replicas are expanded: what discovery produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseDevice {
    pub id: String,
    /// IDs of the candidates the device is made of.
    pub candidates: Vec<String>,
    pub numa_nodes: Vec<i64>,
    pub attributes: Vec<(String, String)>,
    /// At least 1.
    pub replicas: u32,
}

/// Health verdict of one base device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub healthy: bool,
    pub reason: String,
}

/// One device ID as advertised to the kubelet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedDevice {
    /// The kubelet's ID (`<device>::<n>` for replicas).
    pub id: String,
    /// The base device it belongs to.
    pub device_id: String,
    pub healthy: bool,
    pub reason: String,
    pub numa_nodes: Vec<i64>,
    pub attributes: Vec<(String, String)>,
    /// Device nodes of the device's candidates, as host paths.
    pub nodes: Vec<DeviceNode>,
    pub candidates: Vec<String>,
}

/// Everything one resource advertises at one moment. Immutable: a change is
/// a new `DeviceSet` swapped in as a whole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceSet {
    devices: Vec<AdvertisedDevice>,
    index: HashMap<String, usize>,
}

impl DeviceSet {
    /// Expands `bases` with their verdicts into kubelet device IDs, sorted.
    pub fn build(
        bases: &[BaseDevice],
        verdicts: &BTreeMap<String, Verdict>,
        candidates: &BTreeMap<String, Candidate>,
    ) -> Self {
        let mut devices = Vec::new();
        for base in bases {
            let verdict = verdicts.get(&base.id).cloned().unwrap_or(Verdict {
                healthy: true,
                reason: String::new(),
            });
            let mut nodes: Vec<DeviceNode> = Vec::new();
            for c in base.candidates.iter().filter_map(|id| candidates.get(id)) {
                for n in &c.nodes {
                    if !nodes.contains(n) {
                        nodes.push(n.clone());
                    }
                }
            }
            let ids: Vec<String> = if base.replicas <= 1 {
                vec![base.id.clone()]
            } else {
                (0..base.replicas)
                    .map(|n| format!("{}{REPLICA_SEPARATOR}{n}", base.id))
                    .collect()
            };
            for id in ids {
                devices.push(AdvertisedDevice {
                    id,
                    device_id: base.id.clone(),
                    healthy: verdict.healthy,
                    reason: verdict.reason.clone(),
                    numa_nodes: base.numa_nodes.clone(),
                    attributes: base.attributes.clone(),
                    nodes: nodes.clone(),
                    candidates: base.candidates.clone(),
                });
            }
        }
        devices.sort_by(|a, b| a.id.cmp(&b.id));
        let index = devices
            .iter()
            .enumerate()
            .map(|(i, d)| (d.id.clone(), i))
            .collect();
        Self { devices, index }
    }

    pub fn devices(&self) -> &[AdvertisedDevice] {
        &self.devices
    }

    pub fn get(&self, id: &str) -> Option<&AdvertisedDevice> {
        self.index.get(id).map(|&i| &self.devices[i])
    }

    pub fn len(&self) -> usize {
        self.devices.len()
    }

    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }

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
                    id: d.id.clone(),
                    health: if d.healthy {
                        v1beta1::HEALTHY
                    } else {
                        v1beta1::UNHEALTHY
                    }
                    .to_owned(),
                    topology: (!d.numa_nodes.is_empty()).then(|| TopologyInfo {
                        nodes: d.numa_nodes.iter().map(|&id| NumaNode { id }).collect(),
                    }),
                })
                .collect(),
        }
    }

    /// Looks up every ID of a kubelet request, refusing unknown IDs, and
    /// unhealthy ones when `require_healthy`. The error names the ID.
    pub fn resolve<'a>(
        &'a self,
        ids: &[String],
        require_healthy: bool,
    ) -> Result<Vec<&'a AdvertisedDevice>, String> {
        let mut seen = BTreeSet::new();
        ids.iter()
            .map(|id| {
                if !seen.insert(id.as_str()) {
                    return Err(format!("device {id:?} is listed twice"));
                }
                let device = self
                    .get(id)
                    .ok_or_else(|| format!("unknown device {id:?}"))?;
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
                Ok(device)
            })
            .collect()
    }
}

/// The shared handle watchers subscribe to.
pub type SharedDeviceSet = Arc<DeviceSet>;

/// Checks the IDs a discovery produced: unique, non-empty, at most 63
/// characters once replica suffixes are added, kubelet-safe characters.
pub fn validate_base_devices(
    bases: &[BaseDevice],
    candidates: &BTreeMap<String, Candidate>,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for base in bases {
        let longest = if base.replicas <= 1 {
            base.id.len()
        } else {
            base.id.len() + REPLICA_SEPARATOR.len() + (base.replicas - 1).to_string().len()
        };
        if base.id.is_empty() {
            return Err("a device has an empty ID".to_owned());
        }
        if longest > MAX_DEVICE_ID_LEN {
            return Err(format!(
                "device ID {:?} is {longest} characters with its replica suffix; the kubelet allows {MAX_DEVICE_ID_LEN}",
                base.id
            ));
        }
        if base.id.contains(REPLICA_SEPARATOR)
            || !base
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(format!(
                "device ID {:?} may only hold letters, digits, '-', '_', '.' and single ':'",
                base.id
            ));
        }
        if !seen.insert(base.id.as_str()) {
            return Err(format!("device ID {:?} appears twice", base.id));
        }
        if let Some(bad) = base.numa_nodes.iter().find(|n| **n < 0) {
            return Err(format!("device {:?} names NUMA node {bad}", base.id));
        }
        if let Some(unknown) = base
            .candidates
            .iter()
            .find(|c| !candidates.contains_key(*c))
        {
            return Err(format!(
                "device {:?} names candidate {unknown:?}, which the resource did not select",
                base.id
            ));
        }
    }
    Ok(())
}

/// Built-in discovery: every candidate is one device with its replica count.
pub fn builtin_discovery(tagged: &[(Candidate, u32)]) -> Vec<BaseDevice> {
    tagged
        .iter()
        .map(|(c, replicas)| BaseDevice {
            id: c.id.clone(),
            candidates: vec![c.id.clone()],
            numa_nodes: c.numa_nodes.clone(),
            attributes: c
                .attributes
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            replicas: (*replicas).max(1),
        })
        .collect()
}

/// Built-in health: healthy while every candidate is present.
pub fn builtin_verdict(base: &BaseDevice, present: &BTreeSet<String>) -> Verdict {
    let missing: Vec<&str> = base
        .candidates
        .iter()
        .filter(|c| !present.contains(*c))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Verdict {
            healthy: true,
            reason: String::new(),
        }
    } else {
        Verdict {
            healthy: false,
            reason: format!("hardware gone: {}", missing.join(", ")),
        }
    }
}

/// Built-in preferred allocation: the must-include IDs, then devices on
/// the NUMA nodes already chosen (or the node with the most free devices),
/// then devices sharing a base device (replicas) spread last, ties by ID.
pub fn builtin_preferred(
    available: &[&AdvertisedDevice],
    must_include: &[String],
    size: usize,
) -> Vec<String> {
    let mut chosen: Vec<String> = must_include.to_vec();
    let mut numa: BTreeSet<i64> = available
        .iter()
        .filter(|d| must_include.contains(&d.id))
        .flat_map(|d| d.numa_nodes.iter().copied())
        .collect();
    if numa.is_empty() {
        let mut per_node: BTreeMap<i64, usize> = BTreeMap::new();
        for d in available {
            for n in &d.numa_nodes {
                *per_node.entry(*n).or_default() += 1;
            }
        }
        if let Some((&node, _)) = per_node
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        {
            numa.insert(node);
        }
    }
    let mut rest: Vec<&&AdvertisedDevice> = available
        .iter()
        .filter(|d| !chosen.contains(&d.id))
        .collect();
    rest.sort_by_key(|d| {
        let local = d.numa_nodes.is_empty() || d.numa_nodes.iter().any(|n| numa.contains(n));
        (!local, d.id.clone())
    });
    for d in rest {
        if chosen.len() >= size {
            break;
        }
        chosen.push(d.id.clone());
    }
    chosen
}

/// Built-in allocate: one device spec per distinct device node, at the same
/// path in the container, with the resource's cgroup permissions.
pub fn builtin_allocate(
    devices: &[&AdvertisedDevice],
    permissions: &str,
) -> ContainerAllocateResponse {
    let mut seen = BTreeSet::new();
    let mut specs = Vec::new();
    for node in devices.iter().flat_map(|d| d.nodes.iter()) {
        let path = node.path.to_string_lossy().into_owned();
        if seen.insert(path.clone()) {
            specs.push(DeviceSpec {
                container_path: path.clone(),
                host_path: path,
                permissions: permissions.to_owned(),
            });
        }
    }
    ContainerAllocateResponse {
        devices: specs,
        ..Default::default()
    }
}

/// Checks a preferred-allocation answer: exactly `size` distinct IDs from
/// `available`, containing every must-include ID.
pub fn validate_preferred(
    answer: &[String],
    available: &[String],
    must_include: &[String],
    size: usize,
) -> Result<(), String> {
    if answer.len() != size {
        return Err(format!(
            "answered {} IDs, {size} were asked for",
            answer.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for id in answer {
        if !seen.insert(id) {
            return Err(format!("answered {id:?} twice"));
        }
        if !available.contains(id) {
            return Err(format!("answered {id:?}, which is not available"));
        }
    }
    if let Some(missing) = must_include.iter().find(|id| !seen.contains(id)) {
        return Err(format!("left out must-include device {missing:?}"));
    }
    Ok(())
}

/// Checks a container response: absolute paths, permission strings, and
/// CDI names of the form `vendor/class=name`.
pub fn validate_container_response(response: &ContainerAllocateResponse) -> Result<(), String> {
    for spec in &response.devices {
        for path in [&spec.host_path, &spec.container_path] {
            if !path.starts_with('/') {
                return Err(format!("device spec path {path:?} is not absolute"));
            }
        }
        if spec.permissions.is_empty() || !spec.permissions.chars().all(|c| "rwm".contains(c)) {
            return Err(format!(
                "device spec {:?} has permissions {:?}; use r, w and m",
                spec.host_path, spec.permissions
            ));
        }
    }
    for mount in &response.mounts {
        for path in [&mount.host_path, &mount.container_path] {
            if !path.starts_with('/') {
                return Err(format!("mount path {path:?} is not absolute"));
            }
        }
    }
    for key in response.envs.keys() {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(format!("environment variable name {key:?} is not valid"));
        }
    }
    for cdi in &response.cdi_devices {
        let valid = cdi
            .name
            .split_once('=')
            .is_some_and(|(kind, name)| kind.contains('/') && !name.is_empty());
        if !valid {
            return Err(format!(
                "CDI device {:?} is not a fully qualified name like vendor.com/class=name",
                cdi.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: &str, numa: &[i64]) -> AdvertisedDevice {
        AdvertisedDevice {
            id: id.into(),
            device_id: id.into(),
            healthy: true,
            reason: String::new(),
            numa_nodes: numa.to_vec(),
            attributes: vec![],
            nodes: vec![],
            candidates: vec![],
        }
    }

    #[test]
    fn replicas_expand_into_suffixed_ids() {
        let base = BaseDevice {
            id: "fuse".into(),
            candidates: vec![],
            numa_nodes: vec![],
            attributes: vec![],
            replicas: 3,
        };
        let set = DeviceSet::build(&[base], &BTreeMap::new(), &BTreeMap::new());
        let ids: Vec<&str> = set.devices().iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["fuse::0", "fuse::1", "fuse::2"]);
        assert!(set.to_list().devices.iter().all(|d| d.health == "Healthy"));
    }

    #[test]
    fn preferred_keeps_must_include_and_packs_numa() {
        let devs = [
            device("a", &[0]),
            device("b", &[1]),
            device("c", &[1]),
            device("d", &[0]),
        ];
        let refs: Vec<&AdvertisedDevice> = devs.iter().collect();
        let answer = builtin_preferred(&refs, &["b".to_owned()], 2);
        assert_eq!(answer, ["b", "c"]);
        let ids: Vec<String> = devs.iter().map(|d| d.id.clone()).collect();
        validate_preferred(&answer, &ids, &["b".to_owned()], 2).unwrap();
        assert!(validate_preferred(&["a".into(), "a".into()], &ids, &[], 2).is_err());
        assert!(validate_preferred(&["a".into()], &ids, &["b".into()], 1).is_err());
    }

    #[test]
    fn long_and_duplicate_ids_are_refused() {
        let mk = |id: &str, replicas| BaseDevice {
            id: id.into(),
            candidates: vec![],
            numa_nodes: vec![],
            attributes: vec![],
            replicas,
        };
        let err = validate_base_devices(&[mk(&"x".repeat(60), 100)], &BTreeMap::new()).unwrap_err();
        assert!(err.contains("63"), "{err}");
        assert!(validate_base_devices(&[mk("a", 1), mk("a", 1)], &BTreeMap::new()).is_err());
        assert!(validate_base_devices(&[mk("a b", 1)], &BTreeMap::new()).is_err());
    }
}
