//! Device metadata (KEP-5304): for each prepared claim, one JSON file per
//! request naming the claim and the devices the request got, with their
//! attributes as the ResourceSlice publishes them, bind-mounted read-only
//! into the containers that use the request. A workload (KubeVirt, an
//! in-container agent) learns from it which PCI function it was given
//! (`resource.kubernetes.io/pciBusID`) without asking the API server.
//!
//! The layout and the format are those of `k8s.io/dynamic-resource-allocation`
//! (its `kubeletplugin` helper writes them, its `devicemetadata` package
//! reads them), so a consumer built on the upstream decoder reads ours:
//!
//! - on the host, `<plugins-dir>/<driver>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json`
//!   (the plugin's data folder, which the kubelet's plugins folder holds
//!   and the container runtime can bind-mount from);
//! - in the container, `/var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json`,
//!   or `…/resourceclaimtemplates/<pod claim name>/…` for a claim made from
//!   a template (its `resource.kubernetes.io/pod-claim-name` annotation);
//! - the file is a stream of the same `DeviceMetadata` object in two API
//!   versions, `metadata.resource.k8s.io/v1beta1` then `…/v1alpha1`
//!   (Kubernetes 1.37's newest first, then 1.36's, as the upstream
//!   compatibility fixture writes them): a consumer takes the first
//!   version it knows and skips the others;
//! - `<request>` in the paths is the request's base name; the object names
//!   the request as allocated (`<request>/<subrequest>` for a
//!   `firstAvailable` choice).
//!
//! The mount reaches the container through the claim's CDI spec: one CDI
//! device per request, `<claim-uid>_metadata_<request>` (a `_` no DRA
//! device name has, so it never meets a device's CDI name), whose only
//! edit is the mount; its CDI ID is answered with the first device of the
//! request, so a container that uses only some of a claim's requests gets
//! only their files. What was written is recorded in the checkpoint
//! ([`MetadataRecord`]) and removed at unprepare, also by a later process.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::ResourceClaim;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wdp_cdi::{CdiMount, ContainerEdits};
use wdp_dra_client::AttributeValue;
use wdp_resource::DeviceSet;

use crate::allocation::{Picked, advertised_device};
use crate::checkpoint::PreparedDevice;
use crate::claim::ClaimRef;
use crate::devices::{dra_device, partition_device};

/// The plugin data folder's subfolder holding the metadata files.
pub const METADATA_SUBDIR: &str = "dra-device-metadata";
/// The folder in the container the files are mounted under.
pub const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
/// [`CONTAINER_DIR`]'s subfolder for a claim the pod names directly.
pub const RESOURCE_CLAIMS_SUBDIR: &str = "resourceclaims";
/// [`CONTAINER_DIR`]'s subfolder for a claim made from a template.
pub const RESOURCE_CLAIM_TEMPLATES_SUBDIR: &str = "resourceclaimtemplates";
/// What the file name in the container adds to the driver name.
pub const METADATA_FILE_SUFFIX: &str = "-metadata.json";
/// The file name on the host.
pub const HOST_FILE_NAME: &str = "metadata.json";
/// The object's kind.
pub const KIND: &str = "DeviceMetadata";
/// The API versions written, in stream order: newest first.
pub const API_VERSIONS: [&str; 2] = [
    "metadata.resource.k8s.io/v1beta1",
    "metadata.resource.k8s.io/v1alpha1",
];
/// The claim annotation naming the pod's claim entry of a claim made from
/// a template.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The metadata folder of `driver` under the kubelet's `plugins_dir`.
pub fn metadata_root(plugins_dir: &Path, driver: &str) -> PathBuf {
    plugins_dir.join(driver).join(METADATA_SUBDIR)
}

/// The path in the container of `driver`'s file for `request` of a claim:
/// named directly (`pod_claim_name` is `None`) or made from a template.
pub fn container_path(
    driver: &str,
    claim_name: &str,
    pod_claim_name: Option<&str>,
    request: &str,
) -> String {
    let (subdir, name) = match pod_claim_name {
        Some(pod_claim) if !pod_claim.is_empty() => (RESOURCE_CLAIM_TEMPLATES_SUBDIR, pod_claim),
        _ => (RESOURCE_CLAIMS_SUBDIR, claim_name),
    };
    format!("{CONTAINER_DIR}/{subdir}/{name}/{request}/{driver}{METADATA_FILE_SUFFIX}")
}

/// The base name of a request reference: `gpu/large` → `gpu`.
pub fn base_request(request: &str) -> &str {
    request.split_once('/').map_or(request, |(base, _)| base)
}

/// The CDI device (in the claim's spec) that mounts the file of `request`.
pub fn cdi_device_name(uid: &str, request: &str) -> String {
    format!("{uid}_metadata_{request}")
}

// The checkpoint's record.

/// What the checkpoint records of a claim's metadata files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataRecord {
    /// The claim's folder, `<root>/<namespace>_<claim>`.
    pub dir: PathBuf,
    /// The pod's name for a claim made from a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_claim_name: Option<String>,
    /// One file per request.
    pub files: Vec<MetadataFile>,
    /// Fields a newer host wrote, kept.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// One request's file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataFile {
    /// The request's base name.
    pub request: String,
    /// The file on the host.
    pub host_path: PathBuf,
    /// Where the container sees it.
    pub container_path: String,
    /// The CDI device in the claim's spec that mounts it.
    pub cdi_device: String,
    /// Fields a newer host wrote, kept.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// Why metadata files could not be written or removed.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    /// The metadata folder cannot be made or written into.
    #[error("cannot use the device metadata folder {}: {source}", path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write the device metadata file {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file or folder could not be removed.
    #[error("cannot remove the device metadata {}: {source}", path.display())]
    Remove {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// One device of a claim, for its metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimDeviceMetadata {
    /// The request as allocated.
    pub request: String,
    /// The pool.
    pub pool: String,
    /// The DRA device name.
    pub name: String,
    /// Its published attributes.
    pub attributes: BTreeMap<String, AttributeValue>,
}

/// A claim, for its metadata.
#[derive(Clone, Copy, Debug)]
pub struct ClaimIdentity<'a> {
    /// Namespace.
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
    /// UID.
    pub uid: &'a str,
    /// The pod's name for a claim made from a template.
    pub pod_claim_name: Option<&'a str>,
}

/// Writes and removes one driver's metadata files under its root.
#[derive(Clone, Debug)]
pub struct MetadataWriter {
    root: PathBuf,
    driver: String,
}

impl MetadataWriter {
    /// A writer for `driver` under `root` ([`metadata_root`]).
    pub fn new(root: PathBuf, driver: &str) -> Self {
        Self {
            root,
            driver: driver.to_owned(),
        }
    }

    /// The root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes sure files can be written under the root: made if missing, a
    /// file can be created there.
    pub fn check(&self) -> Result<(), MetadataError> {
        let folder = |source| MetadataError::Folder {
            path: self.root.clone(),
            source,
        };
        std::fs::create_dir_all(&self.root).map_err(folder)?;
        tempfile::NamedTempFile::new_in(&self.root)
            .map(drop)
            .map_err(folder)
    }

    /// The folder of claim `namespace`/`name`.
    pub fn claim_dir(&self, namespace: &str, name: &str) -> PathBuf {
        self.root.join(format!("{namespace}_{name}"))
    }

    /// Writes `claim`'s files, one per request of `devices` (in request
    /// order), each atomically; answers the record. On an error nothing
    /// written is left.
    pub fn write(
        &self,
        claim: ClaimIdentity<'_>,
        devices: &[ClaimDeviceMetadata],
    ) -> Result<MetadataRecord, MetadataError> {
        let dir = self.claim_dir(claim.namespace, claim.name);
        let mut record = MetadataRecord {
            dir: dir.clone(),
            pod_claim_name: claim.pod_claim_name.map(str::to_owned),
            files: Vec::new(),
            unknown: Map::new(),
        };
        for (request, members) in by_request(devices) {
            let base = base_request(request);
            let host_path = dir.join(base).join(HOST_FILE_NAME);
            let bytes = self.encode(claim, request, &members);
            if let Err(error) = write_file(&host_path, &bytes) {
                let _ = remove(&record, claim.uid);
                return Err(error);
            }
            record.files.push(MetadataFile {
                request: base.to_owned(),
                container_path: container_path(
                    &self.driver,
                    claim.name,
                    claim.pod_claim_name,
                    base,
                ),
                host_path,
                cdi_device: cdi_device_name(claim.uid, base),
                unknown: Map::new(),
            });
        }
        Ok(record)
    }

    /// The file content of `request` of `claim` with `devices`: the object
    /// in each of [`API_VERSIONS`], pretty JSON, each ended by a newline.
    pub fn encode(
        &self,
        claim: ClaimIdentity<'_>,
        request: &str,
        devices: &[&ClaimDeviceMetadata],
    ) -> Vec<u8> {
        let mut object = DeviceMetadata {
            kind: KIND.to_owned(),
            api_version: String::new(),
            metadata: ObjectMeta {
                name: claim.name.to_owned(),
                namespace: claim.namespace.to_owned(),
                uid: claim.uid.to_owned(),
                generation: 1,
            },
            pod_claim_name: claim.pod_claim_name.map(str::to_owned),
            requests: vec![MetadataRequest {
                name: request.to_owned(),
                devices: devices
                    .iter()
                    .map(|device| MetadataDevice {
                        driver: self.driver.clone(),
                        pool: device.pool.clone(),
                        name: device.name.clone(),
                        attributes: device
                            .attributes
                            .iter()
                            .map(|(key, value)| (key.clone(), Attribute::from(value)))
                            .collect(),
                    })
                    .collect(),
            }],
        };
        let mut bytes = Vec::with_capacity(1024);
        for version in API_VERSIONS {
            version.clone_into(&mut object.api_version);
            // Plain data (strings, numbers, maps with string keys) always
            // serializes.
            if serde_json::to_writer_pretty(&mut bytes, &object).is_ok() {
                bytes.push(b'\n');
            }
        }
        bytes
    }
}

/// `devices` grouped by request, in the order requests first appear.
fn by_request(devices: &[ClaimDeviceMetadata]) -> Vec<(&str, Vec<&ClaimDeviceMetadata>)> {
    let mut groups: Vec<(&str, Vec<&ClaimDeviceMetadata>)> = Vec::new();
    for device in devices {
        match groups.iter_mut().find(|(r, _)| *r == device.request) {
            Some((_, members)) => members.push(device),
            None => groups.push((&device.request, vec![device])),
        }
    }
    groups
}

/// Replaces `path` with `bytes` atomically (a temporary file beside it,
/// renamed over it; not synced: the checkpoint is the durable record and
/// a repeated prepare writes a lost file again), readable by every user
/// (a container's user need not be root), its folder made if missing.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), MetadataError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let folder = |source| MetadataError::Folder {
        path: dir.to_owned(),
        source,
    };
    let write = |source| MetadataError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(folder)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(folder)?;
    tmp.write_all(bytes).map_err(write)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .map_err(write)?;
    tmp.persist(path).map_err(|e| write(e.error))?;
    Ok(())
}

/// The CDI devices of the claim's spec that mount `record`'s files.
pub fn cdi_devices(record: &MetadataRecord) -> Vec<wdp_cdi::Device> {
    record
        .files
        .iter()
        .map(|file| wdp_cdi::Device {
            name: file.cdi_device.clone(),
            container_edits: ContainerEdits {
                mounts: vec![CdiMount {
                    host_path: file.host_path.display().to_string(),
                    container_path: file.container_path.clone(),
                    options: vec!["ro".to_owned(), "bind".to_owned()],
                }],
                ..ContainerEdits::default()
            },
        })
        .collect()
}

/// Adds the CDI ID (`<kind>=<device>`) of each of `record`'s files to the
/// first of `devices` that serves its request, so the kubelet hands the
/// mount to the containers that use the request.
pub fn attach_cdi_ids(devices: &mut [PreparedDevice], kind: &str, record: &MetadataRecord) {
    for file in &record.files {
        let first = devices.iter_mut().find(|device| {
            device
                .request_names
                .iter()
                .any(|r| base_request(r) == file.request)
        });
        if let Some(device) = first {
            let id = wdp_cdi::device_name(kind, &file.cdi_device);
            if !device.cdi_device_ids.contains(&id) {
                device.cdi_device_ids.push(id);
            }
        }
    }
}

/// The attributes device `id` (a partition when `partition`) of `set` is
/// published with by `driver`; none when it is no longer in the set.
pub fn published_attributes(
    driver: &str,
    set: &DeviceSet,
    id: &str,
    partition: bool,
) -> BTreeMap<String, AttributeValue> {
    let mut problems = Vec::new();
    let device = if partition {
        let extras = set.dra();
        extras.partition(id).and_then(|p| {
            let parent = advertised_device(set, &p.parent)?;
            partition_device(driver, extras, parent, p, &mut problems)
        })
    } else {
        set.get(id)
            .and_then(|device| dra_device(driver, device, &mut problems))
    };
    device.map(|d| d.attributes).unwrap_or_default()
}

/// The metadata of recorded `devices`, their attributes as `set` has them
/// now (a file written again after it was lost).
pub fn recorded_devices(
    driver: &str,
    set: &DeviceSet,
    devices: &[PreparedDevice],
) -> Vec<ClaimDeviceMetadata> {
    devices
        .iter()
        .map(|device| ClaimDeviceMetadata {
            request: device.request_names.first().cloned().unwrap_or_default(),
            pool: device.pool_name.clone(),
            name: device.device_name.clone(),
            attributes: published_attributes(
                driver,
                set,
                &device.device_id,
                device.partition_of.is_some(),
            ),
        })
        .collect()
}

/// The pod's name for `claim` when it was made from a template (its
/// [`POD_CLAIM_NAME_ANNOTATION`]).
pub fn pod_claim_name(claim: &ResourceClaim) -> Option<&str> {
    claim
        .metadata
        .annotations
        .as_ref()?
        .get(POD_CLAIM_NAME_ANNOTATION)
        .map(String::as_str)
        .filter(|name| !name.is_empty())
}

/// Writes the metadata files of `claim` (`pod_claim`: its pod's name when
/// made from a template) for its `picked` devices of `set`, by `writer`
/// for `driver`; answers what to record. A failure is logged, naming the
/// claim and the path, and the claim is prepared without metadata (as the
/// upstream helper does): its devices work without it.
pub(crate) fn write_for_claim(
    writer: &MetadataWriter,
    driver: &str,
    claim: &ClaimRef,
    pod_claim: Option<&str>,
    picked: &[Picked<'_>],
    set: &DeviceSet,
) -> Option<MetadataRecord> {
    let devices: Vec<ClaimDeviceMetadata> = picked
        .iter()
        .map(|pick| ClaimDeviceMetadata {
            request: pick.result.request.clone(),
            pool: pick.result.pool.clone(),
            name: pick.result.device.clone(),
            attributes: published_attributes(driver, set, &pick.id, pick.partition),
        })
        .collect();
    let identity = ClaimIdentity {
        namespace: &claim.namespace,
        name: &claim.name,
        uid: &claim.uid,
        pod_claim_name: pod_claim,
    };
    match writer.write(identity, &devices) {
        Ok(record) => Some(record),
        Err(error) => {
            tracing::error!(%driver, %claim, %error, "the claim is prepared without its device metadata files: its containers will not find them under {CONTAINER_DIR}");
            None
        }
    }
}

/// Writes `record`'s files of `claim` again, with the recorded `devices`'
/// attributes as `set` has them now (a file lost or damaged since the
/// prepare: a power loss, someone's cleanup).
pub(crate) fn rewrite(
    driver: &str,
    claim: &ClaimRef,
    record: &MetadataRecord,
    set: &DeviceSet,
    devices: &[PreparedDevice],
) -> Result<(), MetadataError> {
    let writer = MetadataWriter::new(record.dir.clone(), driver);
    let identity = ClaimIdentity {
        namespace: &claim.namespace,
        name: &claim.name,
        uid: &claim.uid,
        pod_claim_name: record.pod_claim_name.as_deref(),
    };
    let devices = recorded_devices(driver, set, devices);
    for (request, members) in by_request(&devices) {
        let base = base_request(request);
        if let Some(file) = record.files.iter().find(|f| f.request == base) {
            write_file(&file.host_path, &writer.encode(identity, request, &members))?;
        }
    }
    Ok(())
}

#[path = "device_metadata_cleanup.rs"]
mod cleanup;
#[path = "device_metadata_format.rs"]
mod format;

pub use cleanup::{is_intact, remove, remove_unrecorded, remove_unrecorded_file, unrecorded_files};
pub use format::{Attribute, DeviceMetadata, MetadataDevice, MetadataRequest, ObjectMeta};

#[cfg(test)]
#[path = "device_metadata_tests.rs"]
mod tests;
