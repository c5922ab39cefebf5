//! Compiled guests on disk: one file per guest build and engine
//! configuration, written after a compile and mapped (not read) on later
//! loads, so that a process that finds its guests there never runs the
//! compiler and keeps their code in clean, file-backed pages the kernel
//! can drop and fault back in, instead of in private heap memory.
//!
//! A file is named `<content hash>-<engine key>.cwasm`: the SHA-256 of the
//! guest's bytes and a digest of wasmtime's compatibility hash of the
//! engine (its version and every setting that changes compiled code), so
//! another build of the host or another engine configuration never picks
//! up a foreign file; wasmtime checks the file's header again on load, and
//! a file it refuses is compiled afresh and rewritten. Files are written
//! beside their final name and renamed into place, so a reader never maps a
//! half-written one.
//!
//! Whoever can write this directory can run code in the host (a compiled
//! guest is native code): it must be writable by the host alone. It is
//! used only when this process's user owns it, and is made private (0700)
//! first, so a folder someone else created in a shared place such as
//! `/tmp` is refused, not trusted.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

use wasmtime::Engine;
use wasmtime::component::Component;

/// A directory of compiled guests for one engine configuration.
#[derive(Debug)]
pub(crate) struct PrecompiledDir {
    dir: PathBuf,
    engine_key: String,
    /// Writes still running (see [`store`](Self::store)); joined on drop.
    writing: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for PrecompiledDir {
    /// Waits for the writes still running: when the engine is gone, its
    /// compiled guests are on disk (what `precompile` relies on).
    fn drop(&mut self) {
        let writing = std::mem::take(
            self.writing
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for write in writing {
            let _ = write.join();
        }
    }
}

impl PrecompiledDir {
    /// The directory `dir` for guests compiled by `engine`: created if
    /// missing, then made private (mode 0700). Refused, naming why, when it
    /// is not this process's user's own: its files are run as native code.
    pub(crate) fn new(dir: PathBuf, engine: &Engine) -> std::io::Result<Self> {
        std::fs::create_dir_all(&dir)?;
        let owner = std::fs::metadata(&dir)?.uid();
        // The owner of /proc/self is this process's effective user.
        let me = std::fs::metadata("/proc/self")?.uid();
        if owner != me {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!("owned by user {owner}, not by this process's user {me}"),
            ));
        }
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Ok(Self {
            dir,
            engine_key: format!("{:016x}", hasher.finish()),
            writing: Mutex::new(Vec::new()),
        })
    }

    /// Where the build with content hash `hash` is kept.
    pub(crate) fn path(&self, hash: &str) -> PathBuf {
        self.dir.join(format!("{hash}-{}.cwasm", self.engine_key))
    }

    /// The build with content hash `hash`, mapped from its file; `None`
    /// when there is none, or when wasmtime refuses the file (it is then
    /// removed, to be written again after the compile).
    pub(crate) fn load(&self, engine: &Engine, hash: &str) -> Option<Component> {
        let path = self.path(hash);
        if !path.is_file() {
            return None;
        }
        match map_component(engine, &path) {
            Ok(component) => Some(component),
            Err(error) => {
                tracing::warn!(path = %path.display(), error = %format!("{error:#}"), "precompiled guest refused; compiling it again");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Writes `component` (content hash `hash`) for later loads, on a
    /// thread of its own: the load that compiled it (a reload waiting to
    /// serve a new guest) does not wait for the disk. A failure (a
    /// read-only directory, a full disk) is logged and otherwise ignored:
    /// the guest is loaded already, only the next start pays.
    pub(crate) fn store(&self, component: &Component, hash: &str) {
        let path = self.path(hash);
        if path.is_file() {
            return;
        }
        let component = component.clone();
        let write = move || {
            let result = component
                .serialize()
                .map_err(|e| std::io::Error::other(format!("{e:#}")))
                .and_then(|bytes| write_atomically(&path, &bytes));
            if let Err(error) = result {
                tracing::warn!(path = %path.display(), %error, "cannot keep the compiled guest on disk");
            }
        };
        let mut writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        writing.retain(|w| !w.is_finished());
        match std::thread::Builder::new()
            .name("wdp-policy-precompiled-write".into())
            .spawn(write)
        {
            Ok(handle) => writing.push(handle),
            Err(error) => {
                tracing::warn!(%error, "cannot start a thread to keep the compiled guest on disk")
            }
        }
    }
}

/// Maps a compiled component from `path`.
#[allow(unsafe_code)]
fn map_component(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime requires the file to hold a component compiled by
    // a compatible engine (it checks the header and configuration itself)
    // and to stay unchanged while mapped. Files in this directory are only
    // written by `store` (from wasmtime's own `serialize`), renamed into
    // place and never modified afterwards; the directory is the host's
    // alone (see the module documentation).
    unsafe { Component::deserialize_file(engine, path) }
}

/// Writes `bytes` beside `path` (a name of this process's own, so two
/// processes filling the directory never share one) and renames the file
/// into place.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let partial = path.with_file_name(format!(".{name}.{}.partial", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&partial, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    result
}
