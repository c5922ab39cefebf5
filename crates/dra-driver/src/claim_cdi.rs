//! The CDI spec of one prepared DRA claim: one file per claim in the CDI
//! folder, `wdp-<vendor>-<class>_<claim-uid>.json`, kind = the resource
//! name. Each prepared device is a CDI device named
//! `<claim-uid>-<DRA device name>` (so names are never reused across
//! claims) carrying its own device nodes; what the `allocate` answer adds
//! beyond those (other nodes, environment, mounts), the companions and
//! `[cdi-edits]` go in the spec-wide edits, which the runtime applies to a
//! container with any of the claim's devices. The claim's device metadata
//! files are mounted by CDI devices of their own, one per request
//! (`<claim-uid>_metadata_<request>`, see `device_metadata`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use wdp_cdi::{CdiMount, CdiNode, ContainerEdits, Spec};
use wdp_config::ResourceConfig;
use wdp_resource::{AdvertisedDevice, ContainerGrant, cdi_edits, cdi_node};

use crate::device_metadata::{self, MetadataRecord};

/// What the spec file names of `resource`'s claims start with.
fn spec_prefix(resource: &str) -> String {
    format!("wdp-{}_", resource.replace('/', "-"))
}

/// The spec file of claim `uid` of `resource` in `dir`.
pub fn spec_file(dir: &Path, resource: &str, uid: &str) -> PathBuf {
    dir.join(format!("{}{uid}.json", spec_prefix(resource)))
}

/// The claim spec files of `resource` in `dir`, with the claim UID each
/// names.
pub fn spec_files(dir: &Path, resource: &str) -> Vec<(String, PathBuf)> {
    let prefix = spec_prefix(resource);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let uid = name.strip_prefix(&prefix)?.strip_suffix(".json")?;
            (!uid.is_empty()).then(|| (uid.to_owned(), entry.path()))
        })
        .collect()
}

/// The VFIO container node a claim of a `[passthrough]` resource gets.
pub const VFIO_CONTAINER_NODE: &str = "/dev/vfio/vfio";

/// The CDI device name of DRA device `device_name` prepared for claim `uid`.
pub fn cdi_device_name(uid: &str, device_name: &str) -> String {
    format!("{uid}-{device_name}")
}

/// The claim's spec: `devices` are the prepared devices with their DRA
/// names, `companions` the resource's companion nodes, `answer` what
/// `allocate` (guest or built-in) answered for them.
pub fn claim_spec(
    config: &ResourceConfig,
    uid: &str,
    devices: &[(&AdvertisedDevice, String)],
    companions: &[wdp_policy::types::DeviceNode],
    answer: &ContainerGrant,
) -> Spec {
    let mut placed: BTreeSet<String> = BTreeSet::new();
    let cdi_devices = devices
        .iter()
        .map(|(device, name)| {
            let mut edits = ContainerEdits {
                device_nodes: device
                    .device
                    .nodes
                    .iter()
                    .filter(|n| placed.insert(n.path.clone()))
                    .map(|n| cdi_node(n, &config.permissions))
                    .collect(),
                ..ContainerEdits::default()
            };
            // A CDI device needs some edit: a device without nodes of its
            // own (all shared, or none) names itself in the environment.
            if edits.device_nodes.is_empty() {
                edits
                    .env
                    .push(format!("WDP_DRA_DEVICE_{}={}", env_key(name), device.id()));
            }
            wdp_cdi::Device {
                name: cdi_device_name(uid, name),
                container_edits: edits,
            }
        })
        .collect();
    let mut common = cdi_edits(&config.cdi_edits, companions, &config.permissions);
    common
        .device_nodes
        .retain(|n| placed.insert(n.path.clone()));
    // A resource binding its devices to a VFIO driver (`[passthrough]`):
    // the container's VFIO node, which every group's node needs.
    if config.passthrough.is_some() && placed.insert(VFIO_CONTAINER_NODE.to_owned()) {
        common.device_nodes.push(CdiNode {
            path: VFIO_CONTAINER_NODE.to_owned(),
            host_path: None,
            node_type: None,
            major: None,
            minor: None,
            permissions: config.permissions.clone(),
        });
    }
    for spec in &answer.devices {
        if placed.insert(spec.container_path.clone()) {
            common.device_nodes.push(CdiNode {
                path: spec.container_path.clone(),
                host_path: (spec.host_path != spec.container_path).then(|| spec.host_path.clone()),
                node_type: None,
                major: None,
                minor: None,
                permissions: spec.permissions.clone(),
            });
        }
    }
    common.env.extend(
        answer
            .envs
            .iter()
            .map(|(key, value)| format!("{key}={value}")),
    );
    common.mounts.extend(answer.mounts.iter().map(|m| CdiMount {
        host_path: m.host_path.clone(),
        container_path: m.container_path.clone(),
        options: if m.read_only {
            vec!["ro".to_owned(), "bind".to_owned()]
        } else {
            vec!["bind".to_owned()]
        },
    }));
    let mut spec = Spec {
        cdi_version: "",
        kind: config.resource.clone(),
        devices: cdi_devices,
        container_edits: common,
    };
    spec.cdi_version = wdp_cdi::minimum_version(&spec);
    spec
}

/// Adds to a claim's `spec` the CDI devices that mount its device
/// `metadata` files (one per request, see `device_metadata`).
pub fn add_metadata_mounts(spec: &mut Spec, metadata: Option<&MetadataRecord>) {
    let Some(metadata) = metadata else {
        return;
    };
    spec.devices.extend(device_metadata::cdi_devices(metadata));
    spec.cdi_version = wdp_cdi::minimum_version(spec);
}

fn env_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

/// Removes `file` if it is there.
pub fn remove_spec(file: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
