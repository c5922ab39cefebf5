//! The kubelet's device-manager checkpoint,
//! `<device-plugin-dir>/kubelet_internal_checkpoint`: the kubelet's own
//! record of the device plugins it knows (`RegisteredDevices`, by resource
//! name, kept until a gone plugin's grace period ends) and of the devices
//! each container got through one (`PodDeviceEntries`).
//!
//! The host reads only which resource names it names, at start: a resource
//! now served through DRA that the kubelet still knows as a device plugin's
//! may have devices held by running containers, so the host reads
//! PodResources before it publishes any of them. The file is the
//! kubelet's; it is never written here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file's name in the device-plugin folder.
pub const FILE_NAME: &str = "kubelet_internal_checkpoint";

/// Why the checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the kubelet's device-manager checkpoint {path}: {reason}")]
pub struct CheckpointError {
    /// The file.
    pub path: PathBuf,
    /// The I/O or JSON error.
    pub reason: String,
}

/// The part of the file read here (Go field names, as the kubelet writes
/// them; `DeviceIDs` and `AllocResp` are not read).
#[derive(Deserialize)]
struct File {
    #[serde(rename = "Data")]
    data: Data,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "PodDeviceEntries", default)]
    entries: Option<Vec<Entry>>,
    #[serde(rename = "RegisteredDevices", default)]
    registered: Option<BTreeMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "ResourceName")]
    resource: String,
}

/// The resource names the kubelet's checkpoint in `device_plugin_dir`
/// names: registered by a device plugin, or held by a container through
/// one. Empty when there is no checkpoint (the kubelet never ran a device
/// plugin here).
pub fn device_plugin_resources(
    device_plugin_dir: &Path,
) -> Result<BTreeSet<String>, CheckpointError> {
    let path = device_plugin_dir.join(FILE_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(error) => {
            return Err(CheckpointError {
                path,
                reason: error.to_string(),
            });
        }
    };
    let file: File = serde_json::from_slice(&bytes).map_err(|error| CheckpointError {
        path,
        reason: error.to_string(),
    })?;
    let mut names: BTreeSet<String> = file
        .data
        .registered
        .unwrap_or_default()
        .into_keys()
        .collect();
    names.extend(
        file.data
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| e.resource),
    );
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_registered_and_held_resources_and_reports_a_damaged_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(device_plugin_resources(dir.path()).unwrap().is_empty());
        // As a kubelet writes it: per-NUMA device IDs, a base64 answer.
        std::fs::write(
            dir.path().join(FILE_NAME),
            r#"{"Data":{"PodDeviceEntries":[{"PodUID":"u1","ContainerName":"c","ResourceName":"example.com/held","DeviceIDs":{"-1":["d0"]},"AllocResp":"CgA="}],"RegisteredDevices":{"example.com/registered":["d1"]}},"Checksum":1234}"#,
        )
        .unwrap();
        let names = device_plugin_resources(dir.path()).unwrap();
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["example.com/held", "example.com/registered"]
        );
        std::fs::write(dir.path().join(FILE_NAME), r#"{"Data":{"PodDev"#).unwrap();
        let error = device_plugin_resources(dir.path()).unwrap_err();
        assert!(error.to_string().contains(FILE_NAME), "{error}");
    }
}
