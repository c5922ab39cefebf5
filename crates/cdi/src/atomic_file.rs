//! Files replaced whole and atomically: the new content goes to a temporary
//! file in the same folder, which is renamed over the old one, so a reader
//! sees the old file or the new one, never part of either. Synced or not,
//! as the caller needs: a record that must survive a power loss (the DRA
//! checkpoint, the device-plugin CDI spec) is synced, and so is the folder
//! the rename changed; what is derived from such a record and written again
//! from it when lost (a DRA claim's CDI spec) is not.

use std::io::Write;
use std::path::Path;

/// Whether [`replace`] waits for the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// The content is synced before the rename, and the folder after it:
    /// once `replace` returns, a power loss keeps the new file.
    Synced,
    /// Nothing is synced: after a power loss the file may be the previous
    /// one, missing, or empty.
    Unsynced,
}

/// Replaces `path` with `bytes` atomically (see the module docs).
pub fn replace(path: &Path, bytes: &[u8], durability: Durability) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    if durability == Durability::Synced {
        tmp.as_file().sync_all()?;
    }
    tmp.persist(path).map_err(|e| e.error)?;
    if durability == Durability::Synced {
        // The rename reaches the disk only with the folder: without this a
        // power loss could bring back the previous file.
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "atomic_file_tests.rs"]
mod tests;
