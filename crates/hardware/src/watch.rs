//! Change watching, the event half of health inputs.
//!
//! [`ChangeWatcher`] puts inotify watches (through the process's one
//! watcher, [`wdp_fs_watch`]) on a replaceable
//! set of host paths, non-recursively, and bumps a generation counter on any
//! create, remove, rename, content or metadata change under them. Receivers
//! ([`ChangeReceiver`]) wake once per burst: events that arrive before a
//! receiver looks are coalesced into one wake-up (a `tokio::sync::watch`
//! channel). What changed is not reported: the host rescans.
//!
//! Real sysfs sends few inotify events (kernfs notifies attribute changes only
//! where a driver calls `sysfs_notify`, and not device add/remove), so the
//! host must also poll; devfs (`/dev`, a devtmpfs) does send create/remove
//! events for nodes, and fixture trees send everything.
//!
//! Ignored, so reading hardware never wakes anyone: open/access/close events,
//! access-time changes, and data writes to device nodes (a write to
//! `/dev/null` is no change). Ignored too, so a policy cannot wake itself
//! in a loop: the echoes of this process's own attribute writes
//! ([`crate::write_attribute`]) for [`OWN_WRITE_ECHO`] after each write.

use std::collections::{BTreeSet, HashSet};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use wdp_fs_watch::event::{EventKind, MetadataKind, ModifyKind};
use wdp_fs_watch::{FolderWatch, RecursiveMode};

use crate::candidate::{Candidate, CandidateKind};
use crate::listing::{DirIdentity, ListingCache};
use crate::nodes::has_glob_meta;
use crate::pci::PCI_DEVICES;
use crate::root::{HostRoot, link_target_host, normalize_host};
use crate::selectors::Selector;
use crate::usb::USB_DEVICES;

/// Watches a set of host paths and signals [`ChangeReceiver`]s on changes.
///
/// Cheap to share behind an `Arc`: [`set_paths`](Self::set_paths) takes `&self`.
/// Dropping it stops the watching and closes every receiver.
pub struct ChangeWatcher {
    root: HostRoot,
    tx: Arc<watch::Sender<u64>>,
    /// Listings of the watched directories, dropped at their events.
    listings: Arc<ListingCache>,
    /// Real paths whose watch the kernel dropped (the path was removed).
    dropped: Arc<Mutex<HashSet<PathBuf>>>,
    state: Mutex<State>,
}

impl std::fmt::Debug for ChangeWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeWatcher")
            .field("root", &self.root)
            .field("generation", &*self.tx.borrow())
            .finish_non_exhaustive()
    }
}

struct State {
    watcher: FolderWatch,
    /// Real paths currently watched.
    watched: BTreeSet<PathBuf>,
}

/// Wakes when the watched paths change. Clone it for several waiters.
#[derive(Clone, Debug)]
pub struct ChangeReceiver {
    rx: watch::Receiver<u64>,
}

impl ChangeReceiver {
    /// Waits for the next change (or burst of changes) after the last one this
    /// receiver saw. `false` when the watcher is gone and no change will come.
    pub async fn changed(&mut self) -> bool {
        self.rx.changed().await.is_ok()
    }

    /// True when a change happened since this receiver last looked; marks it seen.
    pub fn take_changed(&mut self) -> bool {
        // One borrow reads and marks: a change landing between a separate
        // `has_changed` and `mark_unchanged` would be marked seen unreported.
        self.rx.borrow_and_update().has_changed()
    }

    /// Number of (coalesced) change signals so far.
    pub fn generation(&self) -> u64 {
        *self.rx.borrow()
    }
}

/// How long after one of this process's own attribute writes the content
/// and metadata events of that file are taken for its echo, not a change.
pub const OWN_WRITE_ECHO: Duration = Duration::from_secs(1);

/// Files this process wrote recently (canonical paths), with when.
static OWN_WRITES: Mutex<Vec<(PathBuf, Instant)>> = Mutex::new(Vec::new());

/// Remembers that this process just wrote `real` (a canonical path), so
/// watchers take the events that follow for an echo.
pub(crate) fn note_own_write(real: &Path) {
    let mut writes = OWN_WRITES.lock().unwrap_or_else(PoisonError::into_inner);
    let now = Instant::now();
    writes.retain(|(path, at)| now.duration_since(*at) < OWN_WRITE_ECHO && path != real);
    writes.push((real.to_owned(), now));
}

/// Whether `event` only echoes this process's own recent writes.
fn own_write_echo(event: &wdp_fs_watch::Event) -> bool {
    if !matches!(
        event.kind,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_) | ModifyKind::Any)
    ) || event.paths.is_empty()
    {
        return false;
    }
    let writes = OWN_WRITES.lock().unwrap_or_else(PoisonError::into_inner);
    if writes.is_empty() {
        return false;
    }
    let now = Instant::now();
    event.paths.iter().all(|p| {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        writes
            .iter()
            .any(|(path, at)| *path == real && now.duration_since(*at) < OWN_WRITE_ECHO)
    })
}

/// True for events that mean the watched hardware may have changed.
fn relevant(event: &wdp_fs_watch::Event) -> bool {
    if own_write_echo(event) {
        return false;
    }
    match &event.kind {
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)) => false,
        EventKind::Modify(ModifyKind::Data(_)) => !event.paths.iter().all(|p| {
            std::fs::symlink_metadata(p)
                .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_block_device())
        }),
        _ => true,
    }
}

impl ChangeWatcher {
    /// A watcher for paths beneath `root`, watching nothing yet. When the
    /// process's inotify instance cannot be made, [`Self::set_paths`] says
    /// so for each path.
    pub fn new(root: &HostRoot) -> Self {
        let (tx, _) = watch::channel(0u64);
        let tx = Arc::new(tx);
        let dropped: Arc<Mutex<HashSet<PathBuf>>> = Arc::default();
        // The callback holds the sender weakly, so dropping the watcher
        // closes receivers at once, whatever the watcher thread is doing.
        let (event_tx, event_dropped) = (Arc::downgrade(&tx), Arc::clone(&dropped));
        let listings = Arc::new(ListingCache::default());
        let event_listings = Arc::clone(&listings);
        let watcher = FolderWatch::new(move |res| {
            // Before the receivers wake: the scan they run reads anew.
            drop_listings(&event_listings, res);
            match res {
                Ok(event) => {
                    if !relevant(event) {
                        return;
                    }
                    if matches!(
                        event.kind,
                        EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                    ) {
                        event_dropped
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .extend(event.paths.iter().cloned());
                    }
                    tracing::trace!(?event, "hardware change");
                }
                Err(error) => tracing::warn!(%error, "hardware change watcher error"),
            }
            if let Some(tx) = event_tx.upgrade() {
                tx.send_modify(|generation| *generation += 1);
            }
        });
        Self {
            root: root.clone(),
            tx,
            listings,
            dropped,
            state: Mutex::new(State {
                watcher,
                watched: BTreeSet::new(),
            }),
        }
    }

    /// A new receiver; it wakes on changes after this call.
    pub fn subscribe(&self) -> ChangeReceiver {
        ChangeReceiver {
            rx: self.tx.subscribe(),
        }
    }

    /// Replaces the watched set with `host_paths` (directories or files,
    /// watched non-recursively). A path that does not exist is watched
    /// through its nearest existing ancestor beneath the root, so its
    /// re-creation is seen; call `set_paths` again (the host does after each
    /// rescan) to move the watch back down. Returns one warning per path
    /// that could not be watched at all (e.g. the inotify watch limit).
    pub fn set_paths(&self, host_paths: &[PathBuf]) -> Vec<String> {
        let mut wanted = BTreeSet::new();
        for host in host_paths {
            let mut host = normalize_host(host);
            loop {
                if std::fs::symlink_metadata(self.root.resolve(&host)).is_ok() || !host.pop() {
                    break;
                }
            }
            wanted.insert(self.root.resolve(&host));
        }
        let dropped: HashSet<PathBuf> =
            std::mem::take(&mut *self.dropped.lock().unwrap_or_else(PoisonError::into_inner));
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let stale: Vec<PathBuf> = state.watched.difference(&wanted).cloned().collect();
        for path in stale {
            self.listings.distrust(&path);
            state.watcher.unwatch(&path);
            state.watched.remove(&path);
        }
        let mut warnings = Vec::new();
        for path in wanted {
            if state.watched.contains(&path) && !dropped.contains(&path) {
                continue;
            }
            self.listings.distrust(&path);
            // The directory the watch goes on: the same before and after,
            // or its listings are never kept.
            let before = DirIdentity::of(&path);
            match state.watcher.watch(&path, RecursiveMode::NonRecursive) {
                Ok(()) => {
                    if let Some(identity) = before
                        && DirIdentity::of(&path) == Some(identity)
                    {
                        self.listings.trust(&path, identity);
                    }
                    state.watched.insert(path);
                }
                Err(e) => {
                    state.watched.remove(&path);
                    let host = self.root.display_path(&path);
                    tracing::warn!(path = %host.display(), error = %e, "cannot watch");
                    warnings.push(format!("{}: cannot watch: {e}", host.display()));
                }
            }
        }
        warnings
    }

    /// Host paths currently watched (after falling back to ancestors).
    pub fn watched(&self) -> Vec<PathBuf> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state
            .watched
            .iter()
            .map(|p| self.root.display_path(p))
            .collect()
    }

    /// Number of (coalesced) change signals so far.
    pub fn generation(&self) -> u64 {
        *self.tx.borrow()
    }

    /// The listings of the watched directories, for
    /// [`discover_cached`](crate::discover_cached).
    pub fn listings(&self) -> &ListingCache {
        &self.listings
    }
}

/// Drops the kept listings an event may have changed: those of the
/// directories it names and of the ones holding what it names, or all of
/// them for an event naming nothing (a queue overflow) or an error. Only
/// opening, reading, closing and data writes change no listing.
fn drop_listings(listings: &ListingCache, res: &Result<wdp_fs_watch::Event, wdp_fs_watch::Error>) {
    match res {
        Ok(event) if matches!(event.kind, EventKind::Access(_)) => {}
        Ok(event) if matches!(event.kind, EventKind::Modify(ModifyKind::Data(_))) => {}
        Ok(event) if !event.paths.is_empty() => {
            let gone = matches!(
                event.kind,
                EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
            );
            for path in &event.paths {
                listings.changed(path, gone);
            }
        }
        _ => listings.changed_all(),
    }
}

/// The literal directory a node pattern lives in: the components before the
/// first one with glob characters, or the parent of a literal path.
fn pattern_dir(pattern: &str) -> PathBuf {
    let mut dir = PathBuf::from("/");
    let mut literal = true;
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        if has_glob_meta(part) {
            literal = false;
            break;
        }
        dir.push(part);
    }
    if literal {
        dir.pop();
    }
    normalize_host(&dir)
}

/// The host paths worth watching for a resource: the bus lists its
/// selectors scan (`/sys/bus/pci/devices`, `/sys/bus/usb/devices`), the
/// directory each node selector's pattern lives in, and for each candidate
/// its sysfs directory, its driver's directory (the `driver` link's target,
/// where binding adds and removes links) and the parent directory of each of
/// its nodes. Sorted, unique; pass to [`ChangeWatcher::set_paths`].
pub fn watch_paths(
    root: &HostRoot,
    selectors: &[Selector],
    candidates: &[Candidate],
) -> Vec<PathBuf> {
    let mut paths = BTreeSet::new();
    for s in selectors {
        match s {
            Selector::Pci(_) => {
                paths.insert(PathBuf::from(PCI_DEVICES));
            }
            Selector::Usb(_) => {
                paths.insert(PathBuf::from(USB_DEVICES));
            }
            Selector::Nodes(n) => {
                paths.insert(pattern_dir(&n.path));
            }
        }
    }
    for c in candidates {
        if let Some(dir) = &c.sysfs_dir {
            paths.insert(dir.clone());
            if c.kind == CandidateKind::Pci {
                let link = dir.join("driver");
                if let Ok(target) = std::fs::read_link(root.resolve(&link)) {
                    paths.insert(link_target_host(&link, &target));
                }
            }
        }
        for node in &c.nodes {
            if let Some(parent) = node.path.parent() {
                paths.insert(parent.to_path_buf());
            }
        }
    }
    paths.into_iter().filter(|p| p != Path::new("")).collect()
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
