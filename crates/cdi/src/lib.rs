//! CDI (Container Device Interface) specs as this host writes them: the
//! spec's shape ([`Spec`] and its parts), the lowest `cdiVersion` its
//! content needs, where a resource's spec file lives and how it is written
//! (atomically, synced or not), checked and removed. [`names`] holds the
//! CDI naming rules (kinds, device names, hook names), which the
//! configuration follows too, and [`atomic_file`] the whole-file
//! replacement every record of the host is written with.
//!
//! It knows nothing of resources, devices or configuration: what goes into
//! a spec is decided by `wdp-resource` (a device-plugin resource's spec)
//! and `wdp-dra-driver` (a claim's spec).
//!
//! One JSON file per resource in the CDI folder (`--cdi-dir`, default
//! `/var/run/cdi`), kind = the resource name, one CDI device per advertised
//! device ID with its device nodes, and the resource's companions and
//! `[cdi-edits]` for every container. Written atomically (a temporary file
//! in the same folder, then a rename), rewritten whenever the advertised
//! IDs or their nodes change, kept on shutdown (containers restarted from
//! the kubelet's checkpoint still resolve their names) and removed when the
//! resource leaves the configuration. `cdiVersion` is the lowest version
//! the content needs, by the rules of the upstream CDI library's
//! `MinimumRequiredVersion`, so containerd 1.7+ and CRI-O read it.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod atomic_file;
pub mod names;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::atomic_file::Durability;

/// A CDI spec, as serialised.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// The spec version the content needs.
    pub cdi_version: &'static str,
    /// `vendor/class`: the resource name.
    pub kind: String,
    /// One per advertised device ID.
    pub devices: Vec<Device>,
    /// What every container of the resource gets.
    pub container_edits: ContainerEdits,
}

/// One CDI device.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// The advertised device ID.
    pub name: String,
    /// Its device nodes.
    pub container_edits: ContainerEdits,
}

/// CDI container edits (only what this host fills in).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerEdits {
    /// `NAME=value` entries.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Device nodes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<CdiNode>,
    /// Bind mounts.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<CdiMount>,
    /// OCI hooks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<CdiHook>,
}

/// A CDI device node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CdiNode {
    /// The path in the container (and on the host unless `host_path`).
    pub path: String,
    /// The path on the host, when it differs (CDI 0.5.0).
    #[serde(rename = "hostPath", skip_serializing_if = "Option::is_none")]
    pub host_path: Option<String>,
    /// `c` or `b` when known.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub node_type: Option<&'static str>,
    /// Major number, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major: Option<u32>,
    /// Minor number, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minor: Option<u32>,
    /// Cgroup permissions.
    pub permissions: String,
}

/// A CDI mount.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CdiMount {
    /// Path on the host.
    pub host_path: String,
    /// Path in the container.
    pub container_path: String,
    /// Mount options.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// A CDI hook.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CdiHook {
    /// When it runs.
    pub hook_name: String,
    /// The program.
    pub path: String,
    /// Its arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

/// The fully qualified CDI name of device `id` of `kind`.
pub fn device_name(kind: &str, id: &str) -> String {
    format!("{kind}={id}")
}

/// The spec file of `resource` in `dir`: `wdp-<vendor>-<class>.json`.
pub fn spec_file(dir: &Path, resource: &str) -> PathBuf {
    dir.join(format!("wdp-{}.json", resource.replace('/', "-")))
}

/// The lowest CDI version that can express `spec` (the upstream library's
/// rules for the fields this host writes): a class with a dot needs 0.6.0,
/// a device name starting with a digit (a PCI address) or a device node
/// with its own host path 0.5.0; else 0.3.0.
pub fn minimum_version(spec: &Spec) -> &'static str {
    let class_has_dot = spec
        .kind
        .split_once('/')
        .is_some_and(|(_, class)| class.contains('.'));
    if class_has_dot {
        "0.6.0"
    } else if spec
        .devices
        .iter()
        .any(|d| d.name.starts_with(|c: char| c.is_ascii_digit()))
        || std::iter::once(&spec.container_edits)
            .chain(spec.devices.iter().map(|d| &d.container_edits))
            .flat_map(|e| &e.device_nodes)
            .any(|n| n.host_path.is_some())
    {
        "0.5.0"
    } else {
        "0.3.0"
    }
}

/// Writes `spec` for `resource` into `dir` atomically; returns the file.
pub fn write(dir: &Path, resource: &str, spec: &Spec) -> std::io::Result<PathBuf> {
    let file = spec_file(dir, resource);
    write_file(&file, spec)?;
    Ok(file)
}

/// Writes `spec` to `file` atomically and durably
/// ([`Durability::Synced`]).
pub fn write_file(file: &Path, spec: &Spec) -> std::io::Result<()> {
    atomic_file::replace(file, &spec_bytes(spec)?, Durability::Synced)
}

/// Writes `spec` to `file` atomically but not durably
/// ([`Durability::Unsynced`]): for specs derived from a record that is
/// synced, and written again from it when found lost (a DRA claim's spec).
pub fn write_file_unsynced(file: &Path, spec: &Spec) -> std::io::Result<()> {
    atomic_file::replace(file, &spec_bytes(spec)?, Durability::Unsynced)
}

/// `spec` as the file holds it: pretty JSON and a newline.
fn spec_bytes(spec: &Spec) -> std::io::Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(spec).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Makes sure specs can be written into `dir`: created if missing, and a
/// new file can be made there.
pub fn check_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    tempfile::NamedTempFile::new_in(dir).map(drop)
}

/// Removes the spec of `resource` from `dir`, if there is one.
pub fn remove(dir: &Path, resource: &str) -> std::io::Result<()> {
    match std::fs::remove_file(spec_file(dir, resource)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
