//! What makes a refused configuration the same one again: the content of
//! the config directory as a reader sees it (every file reachable from it,
//! symbolic links followed, the `..data` internals of a ConfigMap mount
//! left out) with the error it was refused for. A refused configuration
//! is counted in `reloads_total{result="failure"}` and logged at ERROR
//! once, however many file events or reload attempts it takes
//! ([`crate::metrics::HostMetrics::refused`]); a new bad edit is new
//! content, counted and logged again.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::Path;

use crate::config_sets;
use crate::error::HostError;
use crate::supervisor::Host;

/// How deep folders are followed (symbolic links may loop).
const MAX_DEPTH: usize = 8;

/// Files larger than this are fingerprinted by size and time, not read.
const MAX_READ: u64 = 64 << 20;

impl Host {
    /// The config directory's content now ([`content`]).
    pub(crate) async fn config_content(&self) -> u64 {
        let dir = self.options.config_dir.clone();
        tokio::task::spawn_blocking(move || content(&dir))
            .await
            .unwrap_or_default()
    }

    /// Records that set `set` (`None`: the default), read from the
    /// directory's content `before`, was refused for `error`: `/readyz`'s
    /// error, `config_valid` 0, and one failed reload counted per refused
    /// content (this module). Answers whether this refusal is new
    /// (to be logged at ERROR): not when the same content was refused for
    /// the same reason last, nor when the content changed while it was
    /// read (the change's own events read it again).
    pub(crate) async fn refused(&self, set: Option<&str>, before: u64, error: &HostError) -> bool {
        let message = error.to_string();
        self.last_error.send_replace(Some(message.clone()));
        self.metrics.host.config_valid.set(0);
        let set = config_sets::shown(set);
        if self.config_content().await != before {
            tracing::debug!(%error, set, "configuration refused while it changed; reading it again");
            return false;
        }
        let new = self.metrics.host.refused(set, &key(before, set, &message));
        if !new {
            tracing::debug!(%error, set, "configuration still refused: the same content as refused last");
        }
        new
    }
}

/// The content of config directory `dir` now, as a fingerprint. Blocking.
pub(crate) fn content(dir: &Path) -> u64 {
    let mut hasher = DefaultHasher::new();
    hash_folder(dir, Path::new(""), 0, &mut hasher);
    hasher.finish()
}

/// The key a refusal of set `set` (as shown) for `error` is counted by,
/// the directory's content being `content`.
pub(crate) fn key(content: u64, set: &str, error: &str) -> String {
    format!("{set}\n{content:016x}\n{error}")
}

/// Hashes every entry under `dir` (named relative to the top, `at`), in
/// name order; unreadable entries hash as their name and error kind.
fn hash_folder(dir: &Path, at: &Path, depth: usize, hasher: &mut DefaultHasher) {
    let mut names: Vec<_> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect(),
        Err(error) => {
            (at, error.kind().to_string()).hash(hasher);
            return;
        }
    };
    names.sort();
    for name in names {
        // A ConfigMap mount's `..data`, `..2025_…` and `..data_tmp`: the
        // same content under a new timestamped name at every update.
        if name.to_string_lossy().starts_with("..") {
            continue;
        }
        let path = dir.join(&name);
        let shown = at.join(&name);
        match std::fs::metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                (&shown, "dir").hash(hasher);
                if depth < MAX_DEPTH {
                    hash_folder(&path, &shown, depth + 1, hasher);
                }
            }
            // A FIFO, socket or device is never opened (a FIFO blocks a
            // reader; a device may never end): its kind stands for it.
            Ok(meta) if !meta.is_file() => (&shown, "special", meta.len()).hash(hasher),
            // A file too large to be configuration: its size and time.
            Ok(meta) if meta.len() > MAX_READ => {
                (&shown, meta.len(), meta.modified().ok()).hash(hasher);
            }
            Ok(_) => match std::fs::read(&path) {
                Ok(bytes) => (&shown, bytes).hash(hasher),
                Err(error) => (&shown, error.kind().to_string()).hash(hasher),
            },
            Err(error) => (&shown, error.kind().to_string()).hash(hasher),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_content_keys_the_same_and_an_edit_does_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("guests")).unwrap();
        std::fs::write(dir.path().join("a.toml"), "version = 1").unwrap();
        std::fs::write(dir.path().join("guests/g.wasm"), b"\0asm").unwrap();
        let key = |set: &str, error: &str| key(content(dir.path()), set, error);
        let first = key("default", "bad");
        // Rewritten the same, and a ConfigMap's internals swapped: same.
        std::fs::write(dir.path().join("a.toml"), "version = 1").unwrap();
        std::fs::create_dir(dir.path().join("..2025_01_01")).unwrap();
        assert_eq!(key("default", "bad"), first);
        assert_ne!(key("default", "worse"), first);
        assert_ne!(key("loops", "bad"), first);
        std::fs::write(dir.path().join("guests/g.wasm"), b"\0asm!").unwrap();
        assert_ne!(key("default", "bad"), first);
    }

    #[test]
    fn a_fifo_in_the_directory_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.toml"), "version = 1").unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("x.toml"))
            .status()
            .unwrap();
        assert!(made.success());
        // Opening it would block for ever: this returns at once.
        let with_fifo = content(dir.path());
        std::fs::remove_file(dir.path().join("x.toml")).unwrap();
        assert_ne!(content(dir.path()), with_fifo);
    }
}
