//! The on-disk record of a DRA driver's prepared claims,
//! `<state-dir>/dra/<driver>.json`: which claim (UID, namespace, name) got
//! which devices, and the CDI spec file and device IDs it was given.
//!
//! `NodeUnprepareResources` names only the claim, which may be deleted by
//! then and the host may have restarted since the prepare: this file is
//! what lets unprepare remove the right CDI spec, and what makes a repeated
//! prepare answer the same without running guests again.
//!
//! Two instances of the host share it during a rolling update (the kubelet
//! may send a claim's prepare to one and its unprepare to the other). Every
//! change is made under an exclusive `flock` of `<driver>.lock` beside it,
//! after re-reading the file if another writer replaced it, so neither
//! instance loses the other's records; reads re-read a replaced file first.
//! The file is written atomically (a temporary file, synced, renamed over
//! it, the folder synced) and carries a format version and a checksum of its
//! content.
//!
//! The format only ever gains fields, so a rollback loses nothing: fields
//! this host does not know (written by a newer one) are kept, in each claim
//! and device record and at the top, through every write; and the checksum
//! that decides whether a file is intact, `canonical-checksum`, is taken
//! over the claims as the file holds them with object keys sorted, so it
//! verifies whatever fields a newer host added and in whatever order it
//! wrote them. A file from a newer format version is read the same way,
//! never set aside for being newer. `checksum`, over the claims as this
//! host serializes them, is still written for hosts older than
//! `canonical-checksum`, which verify only that one.
//!
//! A file that cannot be parsed or verified is never guessed at nor
//! overwritten: it is renamed aside to `<driver>.json.unreadable-<seconds>`,
//! logged at ERROR with both paths, and the driver goes on with the claims
//! it can read (none), so new claims keep being prepared.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use wdp_cdi::atomic_file::{self, Durability};
use wdp_resource::HeldDevice;

use crate::checksum::{canonical_checksum, fnv1a};
use crate::device_metadata::MetadataRecord;
use crate::file_stamp::FileStamp;

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
    /// The host's device ID it maps back to: an advertised device's, or a
    /// partition's.
    pub device_id: String,
    /// For a partition: the advertised device it is part of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_of: Option<String>,
    /// Capacity the allocation consumed of a shared device, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumed_capacity: Vec<(String, String)>,
    /// Whether the device allows several allocations at once (then it is
    /// not held exclusively either).
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared: bool,
    /// Fully qualified CDI device IDs the runtime injects.
    pub cdi_device_ids: Vec<String>,
    /// The allocation's share ID, passed through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    /// Whether the allocation had admin access (then it does not hold the
    /// device exclusively).
    #[serde(default)]
    pub admin_access: bool,
    /// Fields a newer host wrote that this one does not know, kept as they
    /// are through its writes.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
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
    /// Whether device statuses were written into the claim (removed at
    /// unprepare).
    #[serde(default, skip_serializing_if = "is_false")]
    pub status_written: bool,
    /// The device metadata files written for it (KEP-5304), removed at
    /// unprepare; absent from records written before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_metadata: Option<Box<MetadataRecord>>,
    /// Its `[passthrough]` groups with the drivers they had: the bind
    /// journal's records, kept in case the journal is lost or damaged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passthrough: Vec<wdp_passthrough::GroupRecord>,
    /// Fields a newer host wrote that this one does not know, kept as they
    /// are through its writes.
    #[serde(flatten)]
    pub unknown: Map<String, Value>,
}

/// Fields added after the first format are left out when they hold their
/// default, so a record without them serializes (and checksums) exactly as
/// the hosts before them wrote it: an upgrade reads the old file as it is.
fn is_false(value: &bool) -> bool {
    !value
}

/// The file's content, as this host writes it.
#[derive(Debug, Serialize)]
struct CheckpointFile<'a> {
    version: u32,
    driver: &'a str,
    /// FNV-1a 64 of `claims` as this host serializes them, hex: what hosts
    /// before `canonical-checksum` verify.
    checksum: String,
    /// FNV-1a 64 of `claims` with object keys sorted, hex.
    #[serde(rename = "canonical-checksum")]
    canonical_checksum: String,
    claims: &'a BTreeMap<String, PreparedClaim>,
    /// Top-level fields a newer host wrote, kept.
    #[serde(flatten)]
    unknown: &'a Map<String, Value>,
}

/// The file's content as read: the claims still as JSON, so that the
/// checksums are taken over what the file holds.
#[derive(Debug, Deserialize)]
struct ReadFile {
    version: u32,
    driver: String,
    checksum: String,
    #[serde(rename = "canonical-checksum", default)]
    canonical_checksum: Option<String>,
    claims: Value,
    #[serde(flatten)]
    unknown: Map<String, Value>,
}

/// What [`Checkpoint::parse`] read.
pub(crate) struct ParsedFile {
    version: u32,
    pub(crate) claims: BTreeMap<String, PreparedClaim>,
    unknown: Map<String, Value>,
}

/// One change to the prepared claims.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Record a claim prepared under this UID.
    Insert(String, PreparedClaim),
    /// Forget the claim of this UID.
    Remove(String),
}

/// A driver's prepared claims, keyed by claim UID, and the file they live
/// in.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    lock_path: PathBuf,
    driver: String,
    claims: BTreeMap<String, PreparedClaim>,
    /// The newest format version read (written back as it is), and the
    /// file's top-level fields this host does not know.
    version: u32,
    unknown: Map<String, Value>,
    /// The file as last read or written; `None`: there was none.
    seen: Option<FileStamp>,
    /// Where an unreadable file was last set aside.
    set_aside: Option<PathBuf>,
    /// An unreadable file that could not be set aside: never written over.
    left_unreadable: Option<FileStamp>,
}

/// Why the checkpoint file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} the DRA checkpoint {path}: {source}")]
pub struct CheckpointError {
    /// What was being done: "write", "lock".
    pub action: &'static str,
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

fn checksum(claims: &BTreeMap<String, PreparedClaim>) -> String {
    fnv1a(&serde_json::to_vec(claims).unwrap_or_default())
}

/// An exclusive `flock` on the checkpoint's lock file, released when
/// dropped (and by the kernel if the process dies holding it).
#[derive(Debug)]
struct FileLock(File);

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl Checkpoint {
    /// Reads `driver`'s checkpoint under `state_dir`. Missing: empty. Not
    /// readable or valid: set aside and logged (see the module docs), then
    /// empty.
    pub fn load(state_dir: &Path, driver: &str) -> Self {
        let path = checkpoint_path(state_dir, driver);
        let mut checkpoint = Self {
            lock_path: path.with_extension("lock"),
            path,
            driver: driver.to_owned(),
            claims: BTreeMap::new(),
            version: CHECKPOINT_VERSION,
            unknown: Map::new(),
            seen: None,
            set_aside: None,
            left_unreadable: None,
        };
        if let Err(error) = checkpoint.refresh() {
            tracing::error!(driver, %error, "cannot read the DRA checkpoint; starting with no prepared claims");
        }
        checkpoint
    }

    fn lock(&self) -> Result<FileLock, CheckpointError> {
        let fail = |source| CheckpointError {
            action: "lock",
            path: self.lock_path.clone(),
            source,
        };
        if let Some(dir) = self.lock_path.parent() {
            std::fs::create_dir_all(dir).map_err(fail)?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock_path)
            // A read-only state folder: an existing lock file still locks
            // when opened for reading, so reads stay consistent.
            .or_else(|_| File::open(&self.lock_path))
            .map_err(fail)?;
        file.lock().map_err(fail)?;
        Ok(FileLock(file))
    }

    /// Re-reads the file if another writer replaced it since it was last
    /// read or written (taking the lock to read a consistent file).
    pub fn refresh(&mut self) -> Result<(), CheckpointError> {
        if FileStamp::of(&self.path) == self.seen {
            return Ok(());
        }
        let _lock = self.lock()?;
        self.reread_if_replaced();
        Ok(())
    }

    /// The lock is held.
    fn reread_if_replaced(&mut self) {
        let stamp = FileStamp::of(&self.path);
        if stamp == self.seen {
            return;
        }
        self.seen = stamp;
        let bytes = match std::fs::read(&self.path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                self.claims.clear();
                return;
            }
            Err(error) => {
                // Unreadable now (permissions, I/O): keep what we knew, try
                // again next time.
                self.seen = None;
                tracing::error!(driver = %self.driver, path = %self.path.display(), %error, "cannot read the DRA checkpoint; serving with the claims last read");
                return;
            }
            Ok(bytes) => bytes,
        };
        match Self::parse(&bytes, &self.driver) {
            Ok(read) => {
                if read.version > CHECKPOINT_VERSION && read.version != self.version {
                    tracing::info!(driver = %self.driver, path = %self.path.display(), version = read.version, "the DRA checkpoint was written by a newer format version; read with its unknown fields kept");
                }
                self.claims = read.claims;
                self.version = read.version.max(CHECKPOINT_VERSION);
                self.unknown = read.unknown;
            }
            Err(problem) => self.set_aside_unreadable(&problem),
        }
    }

    /// Renames an unreadable file aside, never guessing at its content.
    fn set_aside_unreadable(&mut self, problem: &str) {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut aside = self.path.clone().into_os_string();
        aside.push(format!(".unreadable-{seconds}"));
        let aside = PathBuf::from(aside);
        match std::fs::rename(&self.path, &aside) {
            Ok(()) => {
                tracing::error!(driver = %self.driver, path = %self.path.display(), set_aside = %aside.display(), %problem, "the DRA checkpoint is not valid: set aside, not read; claims recorded in it cannot be unprepared by this driver (their CDI specs are removed by name when the kubelet unprepares them), new claims are prepared as usual");
                self.set_aside = Some(aside);
            }
            Err(error) => {
                tracing::error!(driver = %self.driver, path = %self.path.display(), %problem, %error, "the DRA checkpoint is not valid and cannot be set aside; it is left as it is and nothing will be written over it until it is removed");
                self.left_unreadable = FileStamp::of(&self.path);
            }
        }
        self.claims.clear();
        self.seen = FileStamp::of(&self.path);
    }

    /// Reads a file's content: its driver must be `driver`, and its claims
    /// must match `canonical-checksum` (or, in a file from before it,
    /// `checksum`). Any format version from 1 up is read; fields this host
    /// does not know are kept.
    pub(crate) fn parse(bytes: &[u8], driver: &str) -> Result<ParsedFile, String> {
        let file: ReadFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if file.version == 0 {
            return Err("format version 0, which no host writes".to_owned());
        }
        if file.driver != driver {
            return Err(format!("written for driver {:?}", file.driver));
        }
        let claims: BTreeMap<String, PreparedClaim> =
            serde_json::from_value(file.claims.clone()).map_err(|e| format!("claims: {e}"))?;
        match &file.canonical_checksum {
            Some(expected) => {
                let computed = canonical_checksum(&file.claims);
                if computed != *expected {
                    return Err(format!(
                        "canonical-checksum {expected} does not match its content ({computed})"
                    ));
                }
            }
            None => {
                let computed = checksum(&claims);
                if computed != file.checksum {
                    return Err(format!(
                        "checksum {} does not match its content ({computed})",
                        file.checksum
                    ));
                }
            }
        }
        Ok(ParsedFile {
            version: file.version,
            claims,
            unknown: file.unknown,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where an unreadable checkpoint was set aside, if one was.
    pub fn set_aside(&self) -> Option<&Path> {
        self.set_aside.as_deref()
    }

    /// The devices and partitions the recorded claims hold.
    pub fn held_devices(&self) -> impl Iterator<Item = HeldDevice> + '_ {
        self.claims
            .values()
            .flat_map(|claim| &claim.devices)
            .map(|device| HeldDevice {
                device_id: device.device_id.clone(),
                partition_of: device.partition_of.clone(),
            })
    }

    /// The claim prepared under `uid`, as last read.
    pub fn get(&self, uid: &str) -> Option<&PreparedClaim> {
        self.claims.get(uid)
    }

    /// Every prepared claim by UID, as last read.
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
                    .any(|d| d.device_id == device_id && !d.admin_access && !d.shared)
            })
            .map(|(other, _)| other.as_str())
    }

    /// Records `claim` under `uid` and writes the file, under the lock and
    /// on top of whatever another writer recorded; on an error nothing is
    /// recorded. (Tests record this way; the driver stages, writes and
    /// finishes, see `shared_checkpoint`.)
    #[cfg(test)]
    pub fn insert(&mut self, uid: &str, claim: PreparedClaim) -> Result<(), CheckpointError> {
        self.commit(vec![Change::Insert(uid.to_owned(), claim)])
    }

    /// Forgets `uid` and writes the file, under the lock; returns what was
    /// recorded. On an error nothing is forgotten.
    #[cfg(test)]
    pub fn remove(&mut self, uid: &str) -> Result<Option<PreparedClaim>, CheckpointError> {
        let staged = self.stage(vec![Change::Remove(uid.to_owned())])?;
        let removed = staged.undo.first().and_then(|(_, before)| before.clone());
        let written = staged.write();
        self.finish(written)?;
        Ok(removed)
    }

    /// Applies `changes` in order and writes the file once, under the lock
    /// and on top of whatever another writer recorded: one write (and one
    /// sync) for many claims prepared or unprepared at once. On an error
    /// none of them is applied.
    #[cfg(test)]
    pub fn commit(&mut self, changes: Vec<Change>) -> Result<(), CheckpointError> {
        let written = self.stage(changes)?.write();
        self.finish(written)
    }

    /// The first step of a write: takes the lock, re-reads
    /// the file if another writer replaced it, applies `changes` in memory
    /// and makes the file's new content. [`StagedWrite::write`] then writes
    /// it without needing the checkpoint (so readers are not held up by the
    /// disk), and [`Checkpoint::finish`] takes the outcome: until then the
    /// changes are visible to readers but not on disk. On an error nothing
    /// is applied.
    pub(crate) fn stage(&mut self, changes: Vec<Change>) -> Result<StagedWrite, CheckpointError> {
        let lock = self.lock()?;
        self.reread_if_replaced();
        if self.left_unreadable.is_some() && FileStamp::of(&self.path) == self.left_unreadable {
            return Err(self.write_error(std::io::Error::other(
                "the file on disk is not valid and was not set aside; remove it to let the driver record claims again",
            )));
        }
        let undo = changes
            .into_iter()
            .map(|change| match change {
                Change::Insert(uid, claim) => {
                    let before = self.claims.insert(uid.clone(), claim);
                    (uid, before)
                }
                Change::Remove(uid) => {
                    let before = self.claims.remove(&uid);
                    (uid, before)
                }
            })
            .collect();
        let canonical = serde_json::to_value(&self.claims)
            .map(|claims| canonical_checksum(&claims))
            .unwrap_or_default();
        let file = CheckpointFile {
            version: self.version,
            driver: &self.driver,
            checksum: checksum(&self.claims),
            canonical_checksum: canonical,
            claims: &self.claims,
            unknown: &self.unknown,
        };
        let mut staged = StagedWrite {
            _lock: lock,
            path: self.path.clone(),
            bytes: Vec::new(),
            undo,
        };
        match serde_json::to_vec_pretty(&file) {
            Ok(mut bytes) => {
                bytes.push(b'\n');
                staged.bytes = bytes;
                Ok(staged)
            }
            Err(error) => {
                let error = self.write_error(error.into());
                self.undo(staged.undo);
                Err(error)
            }
        }
    }

    /// The last step of a write: the file written (now
    /// what this checkpoint last saw), or, if it could not be, the staged
    /// changes undone.
    pub(crate) fn finish(&mut self, written: WriteOutcome) -> Result<(), CheckpointError> {
        match written {
            WriteOutcome::Written(stamp) => {
                self.seen = stamp;
                Ok(())
            }
            WriteOutcome::Failed { error, undo } => {
                self.undo(undo);
                Err(error)
            }
        }
    }

    /// Puts back what staged changes replaced, the last change first.
    fn undo(&mut self, undo: Vec<(String, Option<PreparedClaim>)>) {
        for (uid, before) in undo.into_iter().rev() {
            match before {
                Some(claim) => self.claims.insert(uid, claim),
                None => self.claims.remove(&uid),
            };
        }
    }

    fn write_error(&self, source: std::io::Error) -> CheckpointError {
        CheckpointError {
            action: "write",
            path: self.path.clone(),
            source,
        }
    }
}

/// Changes applied to a [`Checkpoint`] in memory whose file is still to be
/// written; it holds the lock (so the other instance of a rolling update
/// neither writes nor reads meanwhile) until written.
#[derive(Debug)]
pub(crate) struct StagedWrite {
    _lock: FileLock,
    path: PathBuf,
    bytes: Vec<u8>,
    /// Each changed claim UID with what it held before, in change order.
    undo: Vec<(String, Option<PreparedClaim>)>,
}

/// What [`StagedWrite::write`] did, for [`Checkpoint::finish`].
#[derive(Debug)]
pub(crate) enum WriteOutcome {
    /// The file is written: its stamp now.
    Written(Option<FileStamp>),
    /// It is not: why, and what undoes the staged changes.
    Failed {
        /// Why.
        error: CheckpointError,
        /// What the changed claims held before.
        undo: Vec<(String, Option<PreparedClaim>)>,
    },
}

impl StagedWrite {
    /// Writes the file atomically (a temporary file, synced, renamed over
    /// it, the folder synced), then releases the lock.
    pub fn write(self) -> WriteOutcome {
        match self.write_file() {
            Ok(()) => WriteOutcome::Written(FileStamp::of(&self.path)),
            Err(source) => WriteOutcome::Failed {
                error: CheckpointError {
                    action: "write",
                    path: self.path,
                    source,
                },
                undo: self.undo,
            },
        }
    }

    fn write_file(&self) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        atomic_file::replace(&self.path, &self.bytes, Durability::Synced)
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
