//! Reading DRA checkpoints without serving their driver: which drivers
//! have a checkpoint in a state folder, and the device IDs their prepared
//! claims hold. A host that starts with a resource served through the
//! device-plugin API reads them (also those of drivers no longer
//! configured) so that it never offers a device a prepared claim still
//! holds. Nothing here writes, locks or sets a file aside: an unreadable
//! file is reported, and stays for the driver (or the operator) to deal
//! with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::checkpoint::{Checkpoint, checkpoint_path};

/// Why a checkpoint could not be read.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the DRA checkpoint {path}: {reason}")]
pub struct CheckpointReadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it (I/O error, not JSON, checksum mismatch).
    pub reason: String,
}

/// The drivers with a checkpoint under `state_dir` (`dra/<driver>.json`),
/// sorted; files set aside (`.unreadable-*`), locks and publisher records
/// are not checkpoints.
pub fn checkpointed_drivers(state_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(state_dir.join("dra")) else {
        return Vec::new();
    };
    let mut drivers: Vec<String> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_str()?.to_owned();
            name.strip_suffix(".json").map(str::to_owned)
        })
        .filter(|driver| !driver.is_empty())
        .collect();
    drivers.sort();
    drivers
}

/// The device IDs (the hardware: a partition's parent) held by the claims
/// `driver`'s checkpoint under `state_dir` records as prepared; empty when
/// there is no checkpoint. Devices shared or under admin access count too:
/// the device-plugin API hands devices out exclusively.
pub fn held_by_checkpoint(
    state_dir: &Path,
    driver: &str,
) -> Result<BTreeSet<String>, CheckpointReadError> {
    let path = checkpoint_path(state_dir, driver);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(error) => {
            return Err(CheckpointReadError {
                path,
                reason: error.to_string(),
            });
        }
    };
    let parsed =
        Checkpoint::parse(&bytes, driver).map_err(|reason| CheckpointReadError { path, reason })?;
    Ok(parsed
        .claims
        .into_values()
        .flat_map(|claim| claim.devices)
        .map(|device| device.partition_of.unwrap_or(device.device_id))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_checkpoint_holds_nothing_and_garbage_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(checkpointed_drivers(dir.path()).is_empty());
        assert!(
            held_by_checkpoint(dir.path(), "a.example.com")
                .unwrap()
                .is_empty()
        );
        std::fs::create_dir_all(dir.path().join("dra")).unwrap();
        std::fs::write(dir.path().join("dra/a.example.com.json"), b"{\"vers").unwrap();
        std::fs::write(dir.path().join("dra/a.example.com.lock"), b"").unwrap();
        std::fs::write(dir.path().join("dra/b.example.com.json.unreadable-1"), b"").unwrap();
        assert_eq!(checkpointed_drivers(dir.path()), ["a.example.com"]);
        let error = held_by_checkpoint(dir.path(), "a.example.com").unwrap_err();
        assert!(
            error.to_string().contains("dra/a.example.com.json"),
            "{error}"
        );
    }
}
