//! Compiled functions on disk: Cranelift's incremental compilation cache,
//! kept in a `functions/` folder of the precompiled-guest directory, so a
//! guest whose bytes are new but whose functions were compiled before (an
//! edited policy: the same standard library and bindings glue, one changed
//! function; a rebuild that only changed data or a custom section) compiles
//! only what changed. A reload serving a new build of a guest pays a
//! fraction of a full compile.
//!
//! Each entry is one file named by the hex of Cranelift's cache key, a
//! digest of the function's IR, the target ISA and its flags, and the
//! Cranelift version: another host build or another CPU never reuses a
//! foreign entry. An entry Cranelift cannot decode is a miss (compiled
//! afresh). Entries are written on a thread of their own, so a first
//! compile does not wait for the disk (an entry not written yet is a miss),
//! beside their final name and renamed into place; reads and writes that
//! fail only cost the compile time they would have saved.
//!
//! The folder holds native code, as the `.cwasm` files beside it do, and
//! gets the same protection: it is used only when this process's user owns
//! the precompiled-guest directory and the folder, and both are made
//! private (0700). Entries are a few hundred bytes each and only new
//! functions add any: an edit of a guest adds the functions it changed.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use wasmtime::CacheStore;

/// The folder of the precompiled-guest directory that holds the entries.
pub(crate) const FUNCTIONS_FOLDER: &str = "functions";

/// The largest entry read back; Cranelift's entries are far smaller, and
/// anything bigger is no entry of ours.
const MAX_ENTRY_BYTES: u64 = 16 * 1024 * 1024;

/// Work for the writer thread.
enum Job {
    /// Keep this entry (key, compiled function).
    Write(Vec<u8>, Vec<u8>),
    /// Answer once every entry sent before is on disk.
    Flush(mpsc::Sender<()>),
}

/// Cranelift's incremental compilation cache in a folder of its own.
#[derive(Debug)]
pub(crate) struct FunctionCacheDir {
    dir: PathBuf,
    /// Functions whose compiled code came from the folder.
    reused: AtomicU64,
    /// To the writer thread; `None` once dropping.
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Option<JoinHandle<()>>,
}

impl Drop for FunctionCacheDir {
    /// Waits for the entries still being written (a `precompile` child
    /// leaves them all on disk).
    fn drop(&mut self) {
        drop(
            self.jobs
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl FunctionCacheDir {
    /// The `functions/` folder of the precompiled-guest directory
    /// `precompiled_dir`: both created if missing and made private (0700);
    /// refused, naming why, when either is not this process's user's own.
    pub(crate) fn new(precompiled_dir: &Path) -> std::io::Result<Self> {
        let dir = precompiled_dir.join(FUNCTIONS_FOLDER);
        std::fs::create_dir_all(&dir)?;
        // The owner of /proc/self is this process's effective user.
        let me = std::fs::metadata("/proc/self")?.uid();
        for folder in [precompiled_dir, dir.as_path()] {
            let owner = std::fs::metadata(folder)?.uid();
            if owner != me {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!(
                        "{} is owned by user {owner}, not by this process's user {me}",
                        folder.display()
                    ),
                ));
            }
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700))?;
        }
        let (jobs, received) = mpsc::channel::<Job>();
        let folder = dir.clone();
        let writer = std::thread::Builder::new()
            .name("wdp-policy-function-cache-write".into())
            .spawn(move || {
                let mut written: u64 = 0;
                for job in received {
                    match job {
                        Job::Write(key, value) => {
                            write_entry(&folder, &key, &value, written);
                            written += 1;
                        }
                        Job::Flush(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })?;
        Ok(Self {
            dir,
            reused: AtomicU64::new(0),
            jobs: Mutex::new(Some(jobs)),
            writer: Some(writer),
        })
    }

    /// Returns once every entry inserted so far is on disk (or failed).
    pub(crate) fn wait_for_writes(&self) {
        let (done, finished) = mpsc::channel();
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|jobs| jobs.send(Job::Flush(done)).is_ok());
        if sent {
            let _ = finished.recv();
        }
    }

    /// How many functions were taken from the folder instead of compiled.
    pub(crate) fn reused(&self) -> u64 {
        self.reused.load(Ordering::Relaxed)
    }
}

/// Where the entry with `key` is kept in `dir`.
fn entry_path(dir: &Path, key: &[u8]) -> PathBuf {
    let mut name = String::with_capacity(key.len() * 2);
    for byte in key {
        let _ = write!(name, "{byte:02x}");
    }
    dir.join(name)
}

/// Writes one entry beside its final name (the `sequence`th of this
/// process) and renames it into place.
fn write_entry(dir: &Path, key: &[u8], value: &[u8], sequence: u64) {
    let path = entry_path(dir, key);
    let partial = dir.join(format!(".{}.{sequence}.partial", std::process::id()));
    let create = || std::fs::File::create(&partial);
    let file = create().or_else(|error| {
        // Someone emptied the cache by removing the folder: make it
        // again, private, inside the directory checked at start.
        if error.kind() != std::io::ErrorKind::NotFound {
            return Err(error);
        }
        std::fs::DirBuilder::new().mode(0o700).create(dir)?;
        create()
    });
    let result = file
        .and_then(|mut file| file.write_all(value))
        .and_then(|()| std::fs::rename(&partial, &path));
    if let Err(error) = result {
        let _ = std::fs::remove_file(&partial);
        tracing::debug!(path = %path.display(), %error, "cannot keep a compiled function on disk");
    }
}

impl CacheStore for FunctionCacheDir {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        let path = entry_path(&self.dir, key);
        let bytes = crate::regular_file::read_regular_file(&path, MAX_ENTRY_BYTES).ok()?;
        // Counted as reused even if Cranelift then cannot decode it: a
        // corrupt entry is rewritten by the compile that follows.
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(Cow::Owned(bytes))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|jobs| jobs.send(Job::Write(key.to_vec(), value)).is_ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_missing_ones_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FunctionCacheDir::new(dir.path()).unwrap();
        assert!(cache.get(b"\x01\x02").is_none());
        assert!(cache.insert(b"\x01\x02", b"code".to_vec()));
        cache.wait_for_writes();
        assert_eq!(cache.get(b"\x01\x02").as_deref(), Some(&b"code"[..]));
        assert_eq!(cache.reused(), 1);
        assert!(dir.path().join(FUNCTIONS_FOLDER).join("0102").is_file());
        // No partial file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join(FUNCTIONS_FOLDER))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["0102"]);
    }

    #[test]
    fn a_removed_folder_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FunctionCacheDir::new(dir.path()).unwrap();
        assert!(cache.insert(b"\x01", b"one".to_vec()));
        cache.wait_for_writes();
        std::fs::remove_dir_all(dir.path().join(FUNCTIONS_FOLDER)).unwrap();
        assert!(cache.get(b"\x01").is_none());
        assert!(cache.insert(b"\x02", b"two".to_vec()));
        cache.wait_for_writes();
        assert_eq!(cache.get(b"\x02").as_deref(), Some(&b"two"[..]));
        let mode = std::fs::metadata(dir.path().join(FUNCTIONS_FOLDER))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    #[test]
    fn the_folders_are_made_private() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        FunctionCacheDir::new(dir.path()).unwrap();
        for folder in [dir.path().to_owned(), dir.path().join(FUNCTIONS_FOLDER)] {
            let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", folder.display());
        }
    }

    #[test]
    fn a_folder_it_cannot_create_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"").unwrap();
        assert!(FunctionCacheDir::new(&file).is_err());
    }
}
