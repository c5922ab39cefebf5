//! What a container receives from an admission, whichever protocol hands
//! it over: the device plugin turns a [`ContainerGrant`] into the kubelet's
//! `ContainerAllocateResponse`, the DRA driver into a claim's CDI spec.
//! Environment and annotations are maps (a key given twice keeps its last
//! value, as the kubelet's map would), sorted by key.

use std::collections::BTreeMap;

use prost::encoding::{encoded_len_varint, key_len};
use wdp_policy::types::{ContainerResponse, DeviceSpec, Mount};

/// Everything one container gets for the devices it was admitted with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerGrant {
    /// Environment variables, by name.
    pub envs: BTreeMap<String, String>,
    /// Bind mounts.
    pub mounts: Vec<Mount>,
    /// Device nodes, with their cgroup permissions.
    pub devices: Vec<DeviceSpec>,
    /// Container annotations, by key.
    pub annotations: BTreeMap<String, String>,
    /// Fully qualified CDI device names (`vendor/class=name`).
    pub cdi_devices: Vec<String>,
}

impl From<ContainerResponse> for ContainerGrant {
    fn from(r: ContainerResponse) -> Self {
        Self {
            envs: r.envs.into_iter().collect(),
            mounts: r.mounts,
            devices: r.devices,
            annotations: r.annotations.into_iter().collect(),
            cdi_devices: r.cdi_devices,
        }
    }
}

impl ContainerGrant {
    /// The size of this grant as the kubelet's `ContainerAllocateResponse`
    /// (protobuf: `envs` 1, `mounts` 2, `devices` 3, `annotations` 4,
    /// `cdi_devices` 5), computed without building it: what the kubelet's
    /// message limit is checked against for every protocol.
    pub fn encoded_len(&self) -> usize {
        let mounts = self.mounts.iter().map(|m| {
            nested(
                2,
                string(1, &m.container_path)
                    + string(2, &m.host_path)
                    + if m.read_only { key_len(3) + 1 } else { 0 },
            )
        });
        let devices = self.devices.iter().map(|d| {
            nested(
                3,
                string(1, &d.container_path) + string(2, &d.host_path) + string(3, &d.permissions),
            )
        });
        let cdi = self
            .cdi_devices
            .iter()
            .map(|name| nested(5, string(1, name)));
        map(1, &self.envs)
            + mounts.sum::<usize>()
            + devices.sum::<usize>()
            + map(4, &self.annotations)
            + cdi.sum::<usize>()
    }
}

/// A proto3 string field: absent when empty.
fn string(tag: u32, text: &str) -> usize {
    if text.is_empty() {
        0
    } else {
        nested(tag, text.len())
    }
}

/// A length-delimited field of `len` bytes (an embedded message is there
/// even when empty).
fn nested(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

/// A `map<string, string>` field: one entry message per key.
fn map(tag: u32, entries: &BTreeMap<String, String>) -> usize {
    entries
        .iter()
        .map(|(key, value)| nested(tag, string(1, key) + string(2, value)))
        .sum()
}
