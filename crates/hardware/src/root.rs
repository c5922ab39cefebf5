//! The host root: where hardware is read from, and the mapping between host
//! paths (what the kubelet and guests see) and real paths (what we open).

use std::io;
use std::path::{Component, Path, PathBuf};

/// Where hardware is read from; `/` on a node, `/host` in a DaemonSet, a temp dir in tests.
///
/// Every path this crate *reports* is a host path (absolute, as seen on the
/// node, root prefix stripped); every path it *opens* is [`HostRoot::resolve`]d
/// beneath the root first.
#[derive(Clone, Debug)]
pub struct HostRoot {
    /// The root as given.
    root: PathBuf,
    /// The root with symlinks resolved, when that was possible at construction;
    /// used by [`HostRoot::to_host_path`] for canonicalized paths.
    canonical: Option<PathBuf>,
}

impl Default for HostRoot {
    /// The node's own root, `/`.
    fn default() -> Self {
        Self::new("/")
    }
}

impl HostRoot {
    /// A host root at `root` (need not exist yet; nothing is read here but
    /// the root's canonical form, when it has one). A relative root is made
    /// absolute against the current directory.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let root = root.into();
        let root = std::path::absolute(&root).unwrap_or(root);
        let canonical = std::fs::canonicalize(&root).ok().filter(|c| *c != root);
        Self { root, canonical }
    }

    /// The root itself, as given.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// True when the root is the filesystem root (host paths are real paths).
    pub fn is_slash(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The real path of a host path: `"/dev/fuse"` → `"<root>/dev/fuse"`.
    ///
    /// The host path is normalized lexically first (`.` dropped, `..` applied
    /// but never above `/`), so no host path can name something outside the
    /// root. A relative host path is taken relative to `/`.
    pub fn resolve(&self, host_path: &Path) -> PathBuf {
        let normal = normalize_host(host_path);
        if self.is_slash() {
            return normal;
        }
        let mut real = self.root.clone();
        if let Ok(rest) = normal.strip_prefix("/")
            && !rest.as_os_str().is_empty()
        {
            real.push(rest);
        }
        real
    }

    /// The host path of a real path beneath the root (inverse of
    /// [`resolve`](Self::resolve)); `None` when `real` is not beneath the root.
    /// Accepts paths under the root as given or under its canonical form.
    pub fn to_host_path(&self, real: &Path) -> Option<PathBuf> {
        if !real.is_absolute() {
            return None;
        }
        if self.is_slash() {
            return Some(real.to_path_buf());
        }
        let strip = |base: &Path| {
            real.strip_prefix(base)
                .ok()
                .map(|rest| Path::new("/").join(rest))
        };
        strip(&self.root).or_else(|| self.canonical.as_deref().and_then(strip))
    }

    /// Host path of a real path, or the real path itself when it lies outside
    /// the root (used only for messages, never for reported facts).
    pub(crate) fn display_path(&self, real: &Path) -> PathBuf {
        self.to_host_path(real)
            .unwrap_or_else(|| real.to_path_buf())
    }

    /// Follows the final-component symlinks of the host path `host`, staying
    /// beneath the root: absolute link targets are taken as host paths, and
    /// relative ones are applied lexically. Returns the host path of the final
    /// target; fails when it does not exist. At most 40 links are followed.
    pub(crate) fn follow_links(&self, host: &Path) -> io::Result<PathBuf> {
        let mut current = normalize_host(host);
        for _ in 0..40 {
            let real = self.resolve(&current);
            match std::fs::symlink_metadata(&real) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    let target = std::fs::read_link(&real)?;
                    current = link_target_host(&current, &target);
                }
                Ok(_) => return Ok(current),
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("too many levels of symbolic links"))
    }
}

/// Lexical normalization of a host path: absolute, no `.`, `..` applied and
/// clamped at `/`.
pub(crate) fn normalize_host(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for comp in path.components() {
        match comp {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// Host path a symlink at host path `link` with target `target` points to.
pub(crate) fn link_target_host(link: &Path, target: &Path) -> PathBuf {
    if target.is_absolute() {
        normalize_host(target)
    } else {
        let parent = link.parent().unwrap_or(Path::new("/"));
        normalize_host(&parent.join(target))
    }
}

#[cfg(test)]
#[path = "root_tests.rs"]
mod tests;
