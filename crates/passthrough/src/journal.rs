//! Where the drivers a group had before a bind are kept: the [`Journal`]
//! trait (the DRA driver implements it on its checkpoint), the record it
//! keeps per group ([`GroupRecord`]), and [`FileJournal`], a JSON file
//! replaced atomically on each change, for tests and standalone use.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::error::JournalError;

/// How far a group's bind got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Recorded before the first sysfs write: the bind may be half done.
    /// The next start undoes it ([`Binder::recover`](crate::Binder::recover)).
    Binding,
    /// Every function is on the target driver and the group's node is there.
    Bound,
}

/// One function of a journaled group and the driver it had before the bind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedFunction {
    /// PCI address (`0000:17:00.0`).
    pub address: String,
    /// Its driver before the bind; `None` when it had none (it is then
    /// left unbound on restore).
    pub previous_driver: Option<String>,
}

/// What is kept per bound (or binding) IOMMU group so that the previous
/// drivers can be restored, also after a restart or a kill.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRecord {
    /// The IOMMU group (`30`).
    pub group: String,
    /// The claim the group is bound for.
    pub claim_uid: String,
    /// The driver the group is bound to (`vfio-pci`).
    pub target: String,
    /// How far the bind got.
    pub phase: Phase,
    /// Every function the bind moves or leaves on the target (PCI bridges,
    /// which stay on their driver, are not listed).
    pub functions: Vec<RecordedFunction>,
}

/// Where [`GroupRecord`]s are kept, at most one per group. Methods take
/// `&self` so that binds of different groups may run at once: an
/// implementation serialises its own writes. Each change must be durable
/// when the call returns.
pub trait Journal: Send + Sync {
    /// Adds `record`, or replaces the record of its group.
    fn record(&self, record: &GroupRecord) -> Result<(), JournalError>;
    /// Removes the record of `group`; no record is no error.
    fn forget(&self, group: &str) -> Result<(), JournalError>;
    /// Every record.
    fn records(&self) -> Result<Vec<GroupRecord>, JournalError>;
}

/// The journal file's content.
#[derive(Default, Serialize, Deserialize)]
struct JournalFile {
    version: u32,
    groups: Vec<GroupRecord>,
}

const JOURNAL_VERSION: u32 = 1;
/// Larger than any journal of a real node (a few hundred bytes a group).
const JOURNAL_SIZE_LIMIT: u64 = 16 << 20;

/// A [`Journal`] in one JSON file, rewritten whole (temp file, fsync,
/// rename) on every change. Opening a damaged file is an error naming it;
/// nothing is changed then.
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    records: Mutex<Vec<GroupRecord>>,
}

impl FileJournal {
    /// Opens the journal at `path`; a missing file is an empty journal
    /// (created at the first record).
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, JournalError> {
        let path = path.into();
        let records = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            _ => read_journal(&path)?,
        };
        Ok(Self {
            path,
            records: Mutex::new(records),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Vec<GroupRecord>> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn save(&self, records: &[GroupRecord]) -> Result<(), JournalError> {
        let io = |e: std::io::Error| JournalError::Io {
            path: self.path.clone(),
            error: wdp_regular_file::io_words(&e),
        };
        let file = JournalFile {
            version: JOURNAL_VERSION,
            groups: records.to_vec(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| JournalError::Io {
            path: self.path.clone(),
            error: e.to_string(),
        })?;
        bytes.push(b'\n');
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut tmp_name = self.path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = dir.join(tmp_name);
        let mut out = std::fs::File::create(&tmp).map_err(io)?;
        out.write_all(&bytes).map_err(io)?;
        out.sync_all().map_err(io)?;
        drop(out);
        std::fs::rename(&tmp, &self.path).map_err(io)?;
        if let Ok(d) = std::fs::File::open(dir) {
            // The rename itself durable; a directory that cannot be synced
            // (some filesystems) still has the file.
            let _ = d.sync_all();
        }
        Ok(())
    }
}

fn read_journal(path: &Path) -> Result<Vec<GroupRecord>, JournalError> {
    let bytes = wdp_regular_file::read_regular_file(path, JOURNAL_SIZE_LIMIT).map_err(|e| {
        JournalError::Damaged {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }
    })?;
    let file: JournalFile = serde_json::from_slice(&bytes).map_err(|e| JournalError::Damaged {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })?;
    if file.version != JOURNAL_VERSION {
        return Err(JournalError::Damaged {
            path: path.to_path_buf(),
            detail: format!("version {} where {JOURNAL_VERSION} is known", file.version),
        });
    }
    Ok(file.groups)
}

impl Journal for FileJournal {
    fn record(&self, record: &GroupRecord) -> Result<(), JournalError> {
        let mut records = self.lock();
        let mut next = records.clone();
        match next.iter_mut().find(|r| r.group == record.group) {
            Some(slot) => *slot = record.clone(),
            None => next.push(record.clone()),
        }
        self.save(&next)?;
        *records = next;
        Ok(())
    }

    fn forget(&self, group: &str) -> Result<(), JournalError> {
        let mut records = self.lock();
        if !records.iter().any(|r| r.group == group) {
            return Ok(());
        }
        let next: Vec<GroupRecord> = records
            .iter()
            .filter(|r| r.group != group)
            .cloned()
            .collect();
        self.save(&next)?;
        *records = next;
        Ok(())
    }

    fn records(&self) -> Result<Vec<GroupRecord>, JournalError> {
        Ok(self.lock().clone())
    }
}
