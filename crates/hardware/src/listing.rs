//! Directory listings for the node globs, and the listings a live hardware
//! watch vouches for.
//!
//! A glob such as `/dev/acc*` lists `/dev` and reads the `rdev` of each
//! device node it matches: at 1,024 nodes that is most of what a poll of
//! unchanged hardware costs. A directory under a live inotify watch (a
//! resource's [`ChangeWatcher`](crate::ChangeWatcher)) cannot change that
//! listing without an event: entries are made, removed and renamed, and
//! their type or metadata changed, only with one, and a node's numbers
//! never change in place (a different node is a remove and a create).
//! [`ListingCache`] keeps such listings and drops a directory's at the
//! first event under it (all of them at an event naming no path, such as
//! the queue overflowing), and every listing once it is
//! [`LISTING_MAX_AGE`] old, so that an event lost for a reason this module
//! does not foresee costs at most that long. A listing is kept only when
//! the directory it read is the very one the watch is on (same device and
//! inode: a symlink pointed elsewhere, or a filesystem mounted over it,
//! reads another), and only when nothing was dropped while it was read.
//!
//! Between a change and its event reaching the watcher's thread a scan can
//! still read the kept listing; the event then wakes the resource
//! (`ChangeWatcher`'s receivers), whose next scan reads the directory again.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::fsat;

/// How long a kept listing is used at most before the directory is read
/// again whatever the watch said.
pub const LISTING_MAX_AGE: Duration = Duration::from_secs(60);

/// What a directory listing says an entry is (`d_type`), when it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EntryKind {
    Dir,
    Symlink,
    CharDevice,
    BlockDevice,
    /// Regular files, FIFOs, sockets.
    Other,
}

impl EntryKind {
    pub(crate) fn from_rustix(t: rustix::fs::FileType) -> Option<Self> {
        use rustix::fs::FileType as T;
        Some(match t {
            T::Directory => Self::Dir,
            T::Symlink => Self::Symlink,
            T::CharacterDevice => Self::CharDevice,
            T::BlockDevice => Self::BlockDevice,
            T::RegularFile | T::Fifo | T::Socket => Self::Other,
            // Filesystems without d_type: stat to find out.
            _ => return None,
        })
    }

    pub(crate) fn from_std(t: std::fs::FileType) -> Self {
        use std::os::unix::fs::FileTypeExt;
        if t.is_dir() {
            Self::Dir
        } else if t.is_symlink() {
            Self::Symlink
        } else if t.is_char_device() {
            Self::CharDevice
        } else if t.is_block_device() {
            Self::BlockDevice
        } else {
            Self::Other
        }
    }
}

/// One entry of a directory listing: its name, its own type when the
/// listing gives it, and for a device node listed with numbers, its `rdev`
/// read relative to the open directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Listed {
    pub name: String,
    pub kind: Option<EntryKind>,
    pub rdev: Option<u64>,
}

/// The entries of the directory at real path `dir` whose name `wanted`
/// accepts, sorted by name; with `numbers`, each device node's numbers
/// too, read relative to the open directory (one lookup instead of
/// resolving the node's whole path again).
pub(crate) fn read(
    dir: &Path,
    wanted: &dyn Fn(&str) -> bool,
    numbers: bool,
) -> io::Result<Vec<Listed>> {
    read_open(&fsat::open_dir(dir)?, wanted, numbers)
}

fn read_open(
    fd: &OwnedFd,
    wanted: &dyn Fn(&str) -> bool,
    numbers: bool,
) -> io::Result<Vec<Listed>> {
    let mut out: Vec<Listed> = fsat::entries(fd, true)?
        .into_iter()
        .filter(|(name, _)| wanted(name))
        .map(|(name, t)| {
            let mut kind = EntryKind::from_rustix(t);
            let mut rdev = None;
            if numbers
                && matches!(kind, Some(EntryKind::CharDevice | EntryKind::BlockDevice))
                && let Ok(stat) = fsat::lstat_at(fd, &name)
            {
                // The node as it is now, should it have changed since the
                // listing.
                kind = EntryKind::from_rustix(rustix::fs::FileType::from_raw_mode(stat.st_mode));
                rdev = Some(stat.st_rdev);
            }
            Listed { name, kind, rdev }
        })
        .collect();
    out.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Which directory a path leads to: its device and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirIdentity {
    dev: u64,
    ino: u64,
}

impl DirIdentity {
    /// The directory `path` leads to now (following symlinks); `None` when
    /// it is not one.
    pub(crate) fn of(path: &Path) -> Option<Self> {
        let stat = rustix::fs::stat(path).ok()?;
        Self::directory(&stat)
    }

    fn of_open(fd: impl AsFd) -> Option<Self> {
        Self::directory(&rustix::fs::fstat(fd).ok()?)
    }

    fn directory(stat: &rustix::fs::Stat) -> Option<Self> {
        (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::Directory)
            .then_some(Self {
                dev: stat.st_dev,
                ino: stat.st_ino,
            })
    }
}

/// Listings of watched directories, kept until an event under them (see
/// the module docs). One per [`ChangeWatcher`](crate::ChangeWatcher),
/// which trusts the directories it watches and reports their events;
/// scans read through it with [`discover_cached`](crate::discover_cached).
#[derive(Debug, Default)]
pub struct ListingCache {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Directories (real paths) under a live watch, with the identity of
    /// the directory the watch was put on.
    trusted: HashMap<PathBuf, DirIdentity>,
    /// Kept listings by directory, pattern and whether numbers were read.
    kept: HashMap<(PathBuf, String, bool), Kept>,
    /// Bumped whenever anything is dropped: a listing read while that
    /// happened is not kept.
    drops: u64,
}

impl Inner {
    /// Drops the listings of `dir` (counted, so a listing being read
    /// meanwhile is not kept).
    fn drop_dir(&mut self, dir: &Path) {
        self.drops += 1;
        self.kept.retain(|(kept_dir, _, _), _| kept_dir != dir);
    }
}

#[derive(Debug)]
struct Kept {
    listing: Arc<[Listed]>,
    read_at: Instant,
}

impl ListingCache {
    /// How many listings are kept now (directories times patterns).
    pub fn kept_count(&self) -> usize {
        self.lock().kept.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `dir` (a real path) is under a live watch from now on, put on the
    /// directory `identity` names.
    pub(crate) fn trust(&self, dir: &Path, identity: DirIdentity) {
        let mut inner = self.lock();
        inner.drop_dir(dir);
        inner.trusted.insert(dir.to_owned(), identity);
    }

    /// `dir` is no longer watched: nothing of it is kept.
    pub(crate) fn distrust(&self, dir: &Path) {
        let mut inner = self.lock();
        inner.drop_dir(dir);
        inner.trusted.remove(dir);
    }

    /// An event named `path` (a real path): the listings of that directory
    /// and of the one holding it go. When `gone` (removed or renamed away)
    /// a trusted directory at `path` is trusted no longer: the watch went
    /// with it, and another directory made there may even reuse its inode
    /// number. The next [`ChangeWatcher::set_paths`](crate::ChangeWatcher::set_paths)
    /// watches and trusts what is there then.
    pub(crate) fn changed(&self, path: &Path, gone: bool) {
        let mut inner = self.lock();
        inner.drops += 1;
        if gone {
            inner.trusted.remove(path);
        }
        let parent = path.parent();
        inner
            .kept
            .retain(|(dir, _, _), _| dir != path && Some(dir.as_path()) != parent);
    }

    /// An event that names no path (the queue overflowed, the watcher
    /// failed): every listing goes.
    pub(crate) fn changed_all(&self) {
        let mut inner = self.lock();
        inner.drops += 1;
        inner.kept.clear();
    }

    /// The listing of real directory `dir` for `pattern` (which decides
    /// `wanted`), with numbers or not: a kept one, or one read now and kept
    /// when the directory is trusted.
    pub(crate) fn read(
        &self,
        dir: &Path,
        pattern: &str,
        wanted: &dyn Fn(&str) -> bool,
        numbers: bool,
    ) -> io::Result<Arc<[Listed]>> {
        let key = (dir.to_owned(), pattern.to_owned(), numbers);
        let (trusted, drops) = {
            let inner = self.lock();
            if let Some(kept) = inner.kept.get(&key)
                && kept.read_at.elapsed() < LISTING_MAX_AGE
            {
                return Ok(Arc::clone(&kept.listing));
            }
            (inner.trusted.get(dir).copied(), inner.drops)
        };
        let read_at = Instant::now();
        let fd = fsat::open_dir(dir)?;
        let listing: Arc<[Listed]> = read_open(&fd, wanted, numbers)?.into();
        if let Some(trusted) = trusted
            && DirIdentity::of_open(&fd) == Some(trusted)
        {
            let mut inner = self.lock();
            if inner.drops == drops && inner.trusted.get(dir) == Some(&trusted) {
                inner
                    .kept
                    .retain(|_, kept| kept.read_at.elapsed() < LISTING_MAX_AGE);
                inner.kept.insert(
                    key,
                    Kept {
                        listing: Arc::clone(&listing),
                        read_at,
                    },
                );
            }
        }
        Ok(listing)
    }
}

#[cfg(test)]
#[path = "listing_tests.rs"]
mod tests;
