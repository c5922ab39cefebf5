//! The on-disk record of a DRA driver's prepared claims,
//! `<state-dir>/dra/<driver>.json`: which claim (UID, namespace, name) got
//! which devices, and the CDI spec file and device IDs it was given.
//!
//! `NodeUnprepareResources` names only the claim, which may be deleted by
//! then and the host may have restarted since the prepare: this file is
//! what lets unprepare remove the right CDI spec, and what makes a repeated
//! prepare answer the same without running guests again.
//!
//! The file is written atomically (a temporary file renamed over it) and
//! carries a format version and a checksum of its content. A file that
//! cannot be read, parsed or verified is logged with its path and treated
//! as empty; it never stops the host.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The format version this host writes and reads.
pub const CHECKPOINT_VERSION: u32 = 1;

/// One device prepared for a claim, as answered to the kubelet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedDevice {
    /// The claim's requests this device satisfies.
    pub request_names: Vec<String>,
    /// The ResourceSlice pool it was published in.
    pub pool_name: String,
    /// Its DRA device name.
    pub device_name: String,
    /// The host's device ID it maps back to.
    pub device_id: String,
    /// Fully qualified CDI device IDs the runtime injects.
    pub cdi_device_ids: Vec<String>,
    /// The allocation's share ID, passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// Whether the allocation had admin access (then it does not hold the
    /// device exclusively).
    #[serde(default)]
    pub admin_access: bool,
}

/// One prepared claim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreparedClaim {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The devices prepared for it, in allocation-result order.
    pub devices: Vec<PreparedDevice>,
    /// The CDI spec file written for it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdi_spec: Option<PathBuf>,
}

/// The file's content.
#[derive(Debug, Serialize, Deserialize)]
struct CheckpointFile {
    version: u32,
    driver: String,
    /// FNV-1a 64 of the canonical JSON of `claims`, hex.
    checksum: String,
    claims: BTreeMap<String, PreparedClaim>,
}

/// A driver's prepared claims, keyed by claim UID, and the file they live
/// in.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    driver: String,
    claims: BTreeMap<String, PreparedClaim>,
}

/// Why the checkpoint file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the DRA checkpoint {path}: {source}")]
pub struct CheckpointError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// The checkpoint file of `driver` under `state_dir`.
pub fn checkpoint_path(state_dir: &Path, driver: &str) -> PathBuf {
    state_dir.join("dra").join(format!("{driver}.json"))
}

fn fnv1a(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

fn checksum(claims: &BTreeMap<String, PreparedClaim>) -> String {
    fnv1a(&serde_json::to_vec(claims).unwrap_or_default())
}

impl Checkpoint {
    /// Reads `driver`'s checkpoint under `state_dir`. Missing: empty. Not
    /// readable, not valid or of another version: logged with its path,
    /// then empty (the next write replaces it).
    pub fn load(state_dir: &Path, driver: &str) -> Self {
        let path = checkpoint_path(state_dir, driver);
        let claims = match std::fs::read(&path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => {
                tracing::error!(driver, path = %path.display(), %error, "cannot read the DRA checkpoint; starting with no prepared claims");
                BTreeMap::new()
            }
            Ok(bytes) => match Self::parse(&bytes, driver) {
                Ok(claims) => claims,
                Err(problem) => {
                    tracing::error!(driver, path = %path.display(), %problem, "the DRA checkpoint is not valid; starting with no prepared claims");
                    BTreeMap::new()
                }
            },
        };
        Self {
            path,
            driver: driver.to_owned(),
            claims,
        }
    }

    fn parse(bytes: &[u8], driver: &str) -> Result<BTreeMap<String, PreparedClaim>, String> {
        let file: CheckpointFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if file.version != CHECKPOINT_VERSION {
            return Err(format!(
                "format version {}, this host reads {CHECKPOINT_VERSION}",
                file.version
            ));
        }
        if file.driver != driver {
            return Err(format!("written for driver {:?}", file.driver));
        }
        let computed = checksum(&file.claims);
        if computed != file.checksum {
            return Err(format!(
                "checksum {} does not match its content ({computed})",
                file.checksum
            ));
        }
        Ok(file.claims)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The claim prepared under `uid`.
    pub fn get(&self, uid: &str) -> Option<&PreparedClaim> {
        self.claims.get(uid)
    }

    /// Every prepared claim by UID.
    pub fn claims(&self) -> &BTreeMap<String, PreparedClaim> {
        &self.claims
    }

    /// The UID of a claim other than `uid` holding device `device_id`
    /// without admin access.
    pub fn holder_of(&self, device_id: &str, uid: &str) -> Option<&str> {
        self.claims
            .iter()
            .filter(|(other, _)| other.as_str() != uid)
            .find(|(_, claim)| {
                claim
                    .devices
                    .iter()
                    .any(|d| d.device_id == device_id && !d.admin_access)
            })
            .map(|(other, _)| other.as_str())
    }

    /// Records `claim` under `uid` and writes the file; on a write error
    /// nothing is recorded.
    pub fn insert(&mut self, uid: &str, claim: PreparedClaim) -> Result<(), CheckpointError> {
        let previous = self.claims.insert(uid.to_owned(), claim);
        let written = self.save();
        if written.is_err() {
            match previous {
                Some(previous) => self.claims.insert(uid.to_owned(), previous),
                None => self.claims.remove(uid),
            };
        }
        written
    }

    /// Forgets `uid` and writes the file; returns what was recorded. On a
    /// write error nothing is forgotten.
    pub fn remove(&mut self, uid: &str) -> Result<Option<PreparedClaim>, CheckpointError> {
        let Some(removed) = self.claims.remove(uid) else {
            return Ok(None);
        };
        if let Err(error) = self.save() {
            self.claims.insert(uid.to_owned(), removed);
            return Err(error);
        }
        Ok(Some(removed))
    }

    fn save(&self) -> Result<(), CheckpointError> {
        let fail = |source| CheckpointError {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(fail)?;
        let file = CheckpointFile {
            version: CHECKPOINT_VERSION,
            driver: self.driver.clone(),
            checksum: checksum(&self.claims),
            claims: self.claims.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| fail(e.into()))?;
        bytes.push(b'\n');
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
        tmp.write_all(&bytes).map_err(fail)?;
        tmp.as_file().sync_all().map_err(fail)?;
        tmp.persist(&self.path).map_err(|e| fail(e.error))?;
        // The rename itself reaches the disk only with the folder: without
        // this a crash could bring back the previous file.
        std::fs::File::open(dir)
            .and_then(|folder| folder.sync_all())
            .map_err(fail)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(device_id: &str, admin_access: bool) -> PreparedClaim {
        PreparedClaim {
            namespace: "default".into(),
            name: "c".into(),
            devices: vec![PreparedDevice {
                request_names: vec!["gpu".into()],
                pool_name: "node-a".into(),
                device_name: device_id.into(),
                device_id: device_id.into(),
                cdi_device_ids: vec![format!("example.com/gpu=uid-{device_id}")],
                share_id: None,
                admin_access,
            }],
            cdi_spec: Some(PathBuf::from("/var/run/cdi/x.json")),
        }
    }

    #[test]
    fn survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut checkpoint = Checkpoint::load(dir.path(), "gpu.example.com");
        checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
        checkpoint.insert("uid-2", claim("gpu1", false)).unwrap();
        checkpoint.remove("uid-2").unwrap();
        let reloaded = Checkpoint::load(dir.path(), "gpu.example.com");
        assert_eq!(reloaded.claims().len(), 1);
        assert_eq!(reloaded.get("uid-1"), Some(&claim("gpu0", false)));
        assert_eq!(
            reloaded.path(),
            dir.path().join("dra").join("gpu.example.com.json")
        );
    }

    #[test]
    fn a_device_is_held_by_one_claim_unless_admin_access() {
        let dir = tempfile::tempdir().unwrap();
        let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
        checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
        checkpoint.insert("uid-2", claim("gpu1", true)).unwrap();
        assert_eq!(checkpoint.holder_of("gpu0", "uid-9"), Some("uid-1"));
        assert_eq!(checkpoint.holder_of("gpu0", "uid-1"), None);
        assert_eq!(checkpoint.holder_of("gpu1", "uid-9"), None);
    }

    #[test]
    fn a_corrupt_or_tampered_file_reads_as_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
        checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
        let path = checkpoint.path().to_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("gpu0", "gpu7")).unwrap();
        assert!(
            Checkpoint::load(dir.path(), "d.example.com")
                .claims()
                .is_empty()
        );
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(
            Checkpoint::load(dir.path(), "d.example.com")
                .claims()
                .is_empty()
        );
        // Another driver's file is not taken for ours.
        std::fs::copy(&path, checkpoint_path(dir.path(), "e.example.com")).unwrap();
        let mut ours = Checkpoint::load(dir.path(), "e.example.com");
        ours.insert("uid-3", claim("gpu3", false)).unwrap();
        std::fs::copy(ours.path(), checkpoint_path(dir.path(), "f.example.com")).unwrap();
        assert!(
            Checkpoint::load(dir.path(), "f.example.com")
                .claims()
                .is_empty()
        );
    }
}
