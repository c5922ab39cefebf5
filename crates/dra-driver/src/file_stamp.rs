//! Which version of a file was last seen, told apart without reading it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A file's inode, length and modification time: a rename gives the file a
/// new inode, so another writer's replacement is always noticed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    inode: u64,
    len: u64,
    modified_ns: i64,
}

impl FileStamp {
    /// The stamp of the file at `path`; `None` when there is none.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            inode: meta.ino(),
            len: meta.len(),
            modified_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        })
    }
}
