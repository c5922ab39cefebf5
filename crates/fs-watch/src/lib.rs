//! One inotify instance for the whole process.
//!
//! The host watches its config folder, the kubelet's device-plugin folder,
//! each socket it serves and each resource's hardware paths. Each of those
//! used to be its own `notify` watcher, i.e. its own inotify instance and
//! thread. Closing an inotify instance that holds watches waits for the
//! kernel's fsnotify mark reaper (an SRCU grace period, a few milliseconds
//! at `HZ=250`), and instances closed one after another wait one grace
//! period each: four instances made the process's exit take about 30 ms
//! where one takes about 7.
//!
//! A [`FolderWatch`] is one subscriber of the process's single watcher: it
//! adds and removes paths ([`FolderWatch::watch`], [`FolderWatch::unwatch`])
//! and its handler is called, on the watcher's thread, with every event
//! under one of its own paths. Two subscribers may watch the same path:
//! the kernel watch stays until the last of them lets go. [`close`] ends
//! all watching at once as a shutdown begins; the [`Closing`] it returns
//! removes the watches and closes the instance beside the shutdown, paced
//! so that the close costs little (see there).
//!
//! A handler runs on the watcher's thread and must be quick; it must not
//! call [`FolderWatch::watch`] or [`FolderWatch::unwatch`], nor drop a
//! [`FolderWatch`] (each waits for that thread).

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

pub use notify::{Error, ErrorKind, Event, EventKind, RecursiveMode, event};
use notify::{RecommendedWatcher, Watcher};

/// What a subscriber's handler is given: an event, or an error of the
/// watcher (one naming paths goes to their subscribers, one naming none,
/// such as a queue overflow, to every subscriber).
pub type Handler = dyn Fn(&notify::Result<Event>) + Send + Sync;

/// One subscriber of the process's watcher; dropping it removes its paths
/// (each kernel watch goes with the last subscriber that had it).
pub struct FolderWatch {
    id: u64,
}

impl std::fmt::Debug for FolderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let paths = hub()
            .subscribers()
            .get(&self.id)
            .map(|s| s.paths.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        f.debug_struct("FolderWatch")
            .field("id", &self.id)
            .field("paths", &paths)
            .finish()
    }
}

impl FolderWatch {
    /// A subscriber watching nothing yet; `handler` gets the events under
    /// the paths it will watch.
    pub fn new(handler: impl Fn(&notify::Result<Event>) + Send + Sync + 'static) -> Self {
        let hub = hub();
        let id = hub.next_id.fetch_add(1, Ordering::Relaxed);
        hub.subscribers_mut().insert(
            id,
            Subscriber {
                handler: Arc::new(handler),
                paths: Vec::new(),
            },
        );
        Self { id }
    }

    /// Watches `path` (a folder or a file) for this subscriber. Watching a
    /// path again sets the kernel watch again, which is how a watch the
    /// kernel dropped (its path was removed and made again) is restored.
    ///
    /// # Errors
    /// The watcher's error: the path does not exist, the inotify watch
    /// limit is reached, or no inotify instance could be made.
    pub fn watch(&self, path: &Path, mode: RecursiveMode) -> Result<(), Error> {
        let hub = hub();
        let mut kernel = hub.kernel();
        let first = {
            let mut subscribers = hub.subscribers_mut();
            let Some(me) = subscribers.get_mut(&self.id) else {
                return Ok(());
            };
            let first = !me.paths.iter().any(|(p, _)| p == path);
            if first {
                me.paths.push((path.to_owned(), mode));
            }
            first
        };
        let result = kernel.watch(path, mode);
        match &result {
            Ok(()) if first => *kernel.users.entry(path.to_owned()).or_default() += 1,
            Ok(()) => {}
            Err(_) if first => {
                if let Some(me) = hub.subscribers_mut().get_mut(&self.id) {
                    me.paths.retain(|(p, _)| p != path);
                }
            }
            Err(_) => {}
        }
        result
    }

    /// Stops watching `path` for this subscriber (nothing when it did not).
    pub fn unwatch(&self, path: &Path) {
        let hub = hub();
        let mut kernel = hub.kernel();
        let had = hub.subscribers_mut().get_mut(&self.id).is_some_and(|me| {
            let before = me.paths.len();
            me.paths.retain(|(p, _)| p != path);
            me.paths.len() != before
        });
        if had {
            kernel.release(path);
        }
    }
}

impl Drop for FolderWatch {
    fn drop(&mut self) {
        let hub = hub();
        let mut kernel = hub.kernel();
        // Out of the subscribers first: releasing a path waits for the
        // watcher's thread, which reads them.
        let removed = hub.subscribers_mut().remove(&self.id);
        for (path, _) in removed.map(|me| me.paths).unwrap_or_default() {
            kernel.release(&path);
        }
    }
}

/// Ends all watching, in two steps. This call detaches everything at
/// once, with no system call: no handler is called again, a
/// [`FolderWatch`] dropped afterwards has nothing left to remove, and a
/// later [`FolderWatch::watch`] makes a new instance. The kernel watches
/// and the instance itself go when the returned [`Closing`] finishes. For
/// a process about to exit: call this as the shutdown begins and finish
/// the [`Closing`] beside the shutdown (on its own thread), so that the
/// shutdown's own watch drops remove nothing themselves.
///
/// Why the watches go one at a time, from one place: closing an instance
/// waits for the kernel's fsnotify mark reaper, which waits for an SRCU
/// grace period. An expedited one takes tens of microseconds; a normal
/// one, which the kernel uses when another grace period of the same SRCU
/// domain is running or ended less than 25 µs before, takes 10-30 ms
/// (several jiffies). Removing a folder's last watch also frees its
/// connector in a kernel worker that starts its own grace period at once.
/// Watches removed back to back (the shutdown's drops racing the close's
/// removals did just that), or the instance closed right after them, ask
/// for grace periods while those are running: the exit then waits a
/// normal one. So [`Closing::finish`] removes each watch
/// [`REMOVAL_SPACING`] after the one before (each connector's grace period
/// ends in between, even with one core busy) and closes the instance
/// [`CLOSE_SETTLE`] after the last removal. (A recursive watch's folders
/// go in one burst: the `notify` crate removes them together.)
pub fn close() -> Closing {
    let hub = hub();
    let mut kernel = hub.kernel();
    // Out of the subscribers: no handler is called from here on, and a
    // subscriber dropped from here on has no path to release.
    for subscriber in hub.subscribers_mut().values_mut() {
        subscriber.paths.clear();
    }
    let users = std::mem::take(&mut kernel.users);
    Closing {
        watcher: kernel.watcher.take(),
        paths: users.into_keys().collect(),
    }
}

/// Time between two watch removals in [`Closing::finish`]: longer than a kernel
/// worker's start and an expedited SRCU grace period, with the 25 µs after
/// it in which the next would be a normal one.
pub const REMOVAL_SPACING: Duration = Duration::from_micros(200);

/// How long after the last watch removal [`Closing::finish`] closes the instance
/// at the soonest: the connectors' grace periods have ended, so the close's
/// own is an expedited one. Twice [`REMOVAL_SPACING`], which covers the
/// same wait between removals (docs/performance.md has the reproducer's
/// counts, idle and with both cores busy).
pub const CLOSE_SETTLE: Duration = Duration::from_micros(400);

/// The process's inotify instance after [`close`], its watches still in
/// the kernel but no longer delivered; [`finish`](Closing::finish) (or
/// dropping it) removes them, spaced, and closes the instance.
#[must_use = "finish it beside the shutdown: dropping it at once blocks for the spaced removals"]
pub struct Closing {
    watcher: Option<RecommendedWatcher>,
    paths: Vec<PathBuf>,
}

impl Closing {
    /// Removes the watches [`REMOVAL_SPACING`] apart, then closes the
    /// instance [`CLOSE_SETTLE`] after the last: about 200 µs per watch
    /// beyond the first, and 400 µs. Blocks the thread meanwhile.
    pub fn finish(self) {
        drop(self);
    }
}

impl Drop for Closing {
    fn drop(&mut self) {
        let Some(mut watcher) = self.watcher.take() else {
            return;
        };
        let mut last_removal: Option<Instant> = None;
        for path in &self.paths {
            if last_removal.is_some() {
                std::thread::sleep(REMOVAL_SPACING);
            }
            // Fails harmlessly when the kernel already dropped the watch.
            let _ = watcher.unwatch(path);
            last_removal = Some(Instant::now());
        }
        if let Some(removed) = last_removal {
            std::thread::sleep(CLOSE_SETTLE.saturating_sub(removed.elapsed()));
        }
        // The watcher's thread closes the instance once it is dropped.
        drop(watcher);
    }
}

impl std::fmt::Debug for Closing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closing")
            .field("open", &self.watcher.is_some())
            .field("watches", &self.paths.len())
            .finish()
    }
}

struct Subscriber {
    handler: Arc<Handler>,
    paths: Vec<(PathBuf, RecursiveMode)>,
}

/// The watcher and, per watched path, how many subscribers hold it.
#[derive(Default)]
struct Kernel {
    watcher: Option<RecommendedWatcher>,
    users: HashMap<PathBuf, usize>,
}

impl Kernel {
    fn watch(&mut self, path: &Path, mode: RecursiveMode) -> Result<(), Error> {
        if self.watcher.is_none() {
            self.watcher = Some(notify::recommended_watcher(dispatch)?);
        }
        match self.watcher.as_mut() {
            Some(watcher) => watcher.watch(path, mode),
            None => Ok(()),
        }
    }

    /// One subscriber let go of `path`; the last one removes the watch.
    fn release(&mut self, path: &Path) {
        let Some(users) = self.users.get_mut(path) else {
            return;
        };
        *users -= 1;
        if *users > 0 {
            return;
        }
        self.users.remove(path);
        if let Some(watcher) = self.watcher.as_mut() {
            // Fails harmlessly when the kernel already dropped the watch.
            let _ = watcher.unwatch(path);
        }
    }
}

struct Hub {
    /// Taken first by whoever changes watches, so that a subscriber's
    /// paths and the kernel's watches change together.
    kernel: Mutex<Kernel>,
    /// Read by the watcher's thread for every event; never held while
    /// waiting for that thread.
    subscribers: RwLock<HashMap<u64, Subscriber>>,
    next_id: AtomicU64,
}

impl Hub {
    fn kernel(&self) -> std::sync::MutexGuard<'_, Kernel> {
        self.kernel.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn subscribers(&self) -> std::sync::RwLockReadGuard<'_, HashMap<u64, Subscriber>> {
        self.subscribers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn subscribers_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<u64, Subscriber>> {
        self.subscribers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

fn hub() -> &'static Hub {
    static HUB: OnceLock<Hub> = OnceLock::new();
    HUB.get_or_init(|| Hub {
        kernel: Mutex::new(Kernel::default()),
        subscribers: RwLock::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    })
}

/// Whether `path` lies under a subscriber's `watched` path: the path
/// itself, a direct child, or for a recursive watch anything beneath.
fn covers(watched: &Path, mode: RecursiveMode, path: &Path) -> bool {
    match mode {
        RecursiveMode::Recursive => path.starts_with(watched),
        RecursiveMode::NonRecursive => path == watched || path.parent() == Some(watched),
    }
}

/// The watcher's callback: hands the event to each subscriber it concerns,
/// outside the lock.
fn dispatch(event: notify::Result<Event>) {
    let paths: &[PathBuf] = match &event {
        Ok(event) => &event.paths,
        Err(error) => &error.paths,
    };
    let handlers: Vec<Arc<Handler>> = hub()
        .subscribers()
        .values()
        .filter(|s| {
            paths.is_empty()
                || paths.iter().any(|path| {
                    s.paths
                        .iter()
                        .any(|(watched, mode)| covers(watched, *mode, path))
                })
        })
        .map(|s| Arc::clone(&s.handler))
        .collect();
    if handlers.is_empty() {
        tracing::trace!(?event, "change under no subscriber's path");
    }
    for handler in handlers {
        handler(&event);
    }
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
