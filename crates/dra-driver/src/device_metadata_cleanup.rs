//! Removing device metadata files: a claim's recorded files at unprepare,
//! the files naming a claim the checkpoint does not record, and, at start,
//! files no record names once old enough; each only when it names the
//! claim it is removed for (a newer claim of the same name keeps its own).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{DeviceMetadata, HOST_FILE_NAME, MetadataError, MetadataRecord};

/// Whether every file of `record` is there and names claim `uid`.
pub fn is_intact(record: &MetadataRecord, uid: &str) -> bool {
    record
        .files
        .iter()
        .all(|file| names_claim(&file.host_path, uid) == Some(true))
}

/// Far more than a file holds (32 attributes of a few devices).
const LARGEST_FILE: u64 = 4 * 1024 * 1024;

/// Whether the file at `path` is a metadata stream naming claim `uid`:
/// `None` when it is missing, not a plain file or not such a stream.
fn names_claim(path: &Path, uid: &str) -> Option<bool> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() || meta.len() > LARGEST_FILE {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let first = serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<DeviceMetadata>()
        .next()?
        .ok()?;
    Some(first.metadata.uid == uid)
}

/// Removes `record`'s files of claim `uid` and the folders they leave
/// empty. A file that another claim of the same name wrote since (it names
/// another UID) stays.
pub fn remove(record: &MetadataRecord, uid: &str) -> Result<(), MetadataError> {
    for file in &record.files {
        remove_own_file(&file.host_path, uid)?;
    }
    remove_empty_dir(&record.dir);
    Ok(())
}

/// Removes what a claim the checkpoint does not record left in its folder
/// `dir`: each request's file that names `uid` (or is damaged), and the
/// folders left empty. Answers whether anything was removed.
pub fn remove_unrecorded(dir: &Path, uid: &str) -> Result<bool, MetadataError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(false);
    };
    let mut removed = false;
    for entry in entries.flatten() {
        let file = entry.path().join(HOST_FILE_NAME);
        if std::fs::symlink_metadata(&file).is_ok() {
            removed |= remove_own_file(&file, uid)?;
        }
    }
    remove_empty_dir(dir);
    Ok(removed)
}

/// Removes `file` unless it names a claim other than `uid`; its folder
/// goes when that leaves it empty. Answers whether it was removed.
fn remove_own_file(file: &Path, uid: &str) -> Result<bool, MetadataError> {
    if names_claim(file, uid) == Some(false) {
        return Ok(false);
    }
    match std::fs::remove_file(file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) => {
            return Err(MetadataError::Remove {
                path: file.to_owned(),
                source,
            });
        }
    }
    if let Some(dir) = file.parent() {
        remove_empty_dir(dir);
    }
    Ok(true)
}

/// The metadata files under `root` that `recorded` does not hold (the
/// host stopped between writing a claim's files and recording the claim)
/// and last modified more than `age` ago (a prepare in progress, here or in
/// the other instance of a rolling update, is younger).
pub fn unrecorded_files(
    root: &Path,
    recorded: &BTreeSet<PathBuf>,
    age: std::time::Duration,
) -> Vec<PathBuf> {
    let Ok(claims) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    claims
        .flatten()
        .filter_map(|claim| std::fs::read_dir(claim.path()).ok())
        .flat_map(|requests| requests.flatten())
        .map(|request| request.path().join(HOST_FILE_NAME))
        .filter(|file| !recorded.contains(file))
        .filter(|file| {
            std::fs::symlink_metadata(file)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > age))
        })
        .collect()
}

/// Removes an unrecorded `file` and the request and claim folders it
/// leaves empty.
pub fn remove_unrecorded_file(file: &Path) -> Result<(), MetadataError> {
    std::fs::remove_file(file).map_err(|source| MetadataError::Remove {
        path: file.to_owned(),
        source,
    })?;
    let request = file.parent();
    if let Some(request) = request {
        remove_empty_dir(request);
    }
    if let Some(claim) = request.and_then(Path::parent) {
        remove_empty_dir(claim);
    }
    Ok(())
}

/// Removes `dir` if it is empty (anything else there stays).
fn remove_empty_dir(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}
