//! Device nodes: globbing host paths beneath the root, and telling their type
//! and device numbers.
//!
//! # Type and numbers
//!
//! A real device node's type and major/minor come from its metadata (`rdev`,
//! split the Linux way). A symlink is followed within the root (an absolute
//! target is taken as a host path) and the node is reported under the path
//! that matched, not the target. Directories never match.
//!
//! Fixture trees cannot hold real device nodes (git cannot store them and
//! `mknod` needs root), so a *regular file* (or any other non-device file)
//! standing where a node should be is reported as follows:
//! 1. when the code that found the node knows its sysfs `dev` attribute
//!    (e.g. `…/drm/renderD128/dev` containing `226:128`, or a USB device's
//!    `dev`), it is a `Char` node with those numbers;
//! 2. else, when some `/sys/dev/char/<maj>:<min>` (or `/sys/dev/block/…`)
//!    link leads to a device directory whose `uevent` says
//!    `DEVNAME=<path below /dev>`, it is a `Char` (or `Block`) node with those
//!    numbers;
//! 3. else it is `NodeType::Other` with major and minor 0.
//!
//! On a real node rules 1–3 never apply: devfs holds real nodes.

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::candidate::{DeviceNode, NodeType};
use crate::error::HardwareError;
use crate::listing::{self, EntryKind, Listed, ListingCache};
use crate::root::{HostRoot, link_target_host};
use crate::sysfs;

/// Linux major number of an encoded `dev_t`.
pub fn dev_major(dev: u64) -> u32 {
    (((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)) as u32
}

/// Linux minor number of an encoded `dev_t`.
pub fn dev_minor(dev: u64) -> u32 {
    (((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)) as u32
}

/// Parses a sysfs `dev` value, `"226:128"`.
pub(crate) fn parse_devnum(s: &str) -> Option<(u32, u32)> {
    let (major, minor) = s.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// True when `s` contains glob metacharacters.
pub(crate) fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// A node as resolved: the reported node, plus where it leads.
#[derive(Clone, Debug)]
pub(crate) struct ResolvedNode {
    pub node: DeviceNode,
    /// Host path of the final symlink target, when the path was a symlink.
    pub target: Option<PathBuf>,
    /// Host path of the device's sysfs directory, when known from rule 2.
    pub sysfs_dir: Option<PathBuf>,
}

/// Resolves device nodes beneath one root, with a lazily built index of
/// `/sys/dev/{char,block}` for fixture stand-ins (rule 2 above), and the
/// names those folders hold (one listing each per resolver, i.e. per scan,
/// instead of a failing `readlink` per node that has no sysfs entry).
pub(crate) struct NodeResolver<'a> {
    root: &'a HostRoot,
    listings: Option<&'a ListingCache>,
    index: Option<HashMap<PathBuf, (NodeType, u32, u32, PathBuf)>>,
    char_entries: OnceCell<HashSet<String>>,
    block_entries: OnceCell<HashSet<String>>,
}

impl<'a> NodeResolver<'a> {
    pub fn new(root: &'a HostRoot) -> Self {
        Self::with_listings(root, None)
    }

    /// A resolver whose globs read watched directories through `listings`.
    pub fn with_listings(root: &'a HostRoot, listings: Option<&'a ListingCache>) -> Self {
        Self {
            root,
            listings,
            index: None,
            char_entries: OnceCell::new(),
            block_entries: OnceCell::new(),
        }
    }

    /// Resolves the node at host path `host`. `hint` is the `dev` numbers
    /// known from the caller's sysfs (rule 1). `Ok(None)` for a directory;
    /// `Err(NotFound)` when the path or its link target is missing.
    pub fn resolve(
        &mut self,
        host: &Path,
        hint: Option<(u32, u32)>,
    ) -> io::Result<Option<ResolvedNode>> {
        self.resolve_typed(host.to_path_buf(), hint, None, None)
            .map_err(|(_, e)| e)
    }

    /// As [`resolve`](Self::resolve), with what a directory listing
    /// already gave: the path's own file type (saves a `stat` for anything
    /// that is not a device node or a symlink) and a device node's `rdev`
    /// (saves it for a device node too).
    fn resolve_listed(
        &mut self,
        host: PathBuf,
        known: Option<EntryKind>,
        rdev: Option<u64>,
    ) -> Result<Option<ResolvedNode>, (PathBuf, io::Error)> {
        self.resolve_typed(host, None, known, rdev)
    }

    fn resolve_typed(
        &mut self,
        host: PathBuf,
        hint: Option<(u32, u32)>,
        known: Option<EntryKind>,
        known_rdev: Option<u64>,
    ) -> Result<Option<ResolvedNode>, (PathBuf, io::Error)> {
        match self.classify(&host, hint, known, known_rdev) {
            Ok(Some((node_type, major, minor, target, sysfs_dir))) => Ok(Some(ResolvedNode {
                node: DeviceNode {
                    path: host,
                    node_type,
                    major,
                    minor,
                },
                target,
                sysfs_dir,
            })),
            Ok(None) => Ok(None),
            Err(e) => Err((host, e)),
        }
    }

    /// Type, numbers, symlink target and sysfs dir of the node at `host`;
    /// `None` for a directory.
    #[allow(clippy::type_complexity)]
    fn classify(
        &mut self,
        host: &Path,
        hint: Option<(u32, u32)>,
        known: Option<EntryKind>,
        known_rdev: Option<u64>,
    ) -> io::Result<Option<(NodeType, u32, u32, Option<PathBuf>, Option<PathBuf>)>> {
        let (own_kind, mut meta) = match known {
            Some(kind) => (kind, None),
            None => {
                let meta = std::fs::symlink_metadata(self.root.resolve(host))?;
                (EntryKind::from_std(meta.file_type()), Some(meta))
            }
        };
        let mut target = None;
        let mut kind = own_kind;
        if own_kind == EntryKind::Symlink {
            // On `/` the kernel follows links; under another root, links are
            // followed by hand so absolute targets stay beneath the root.
            let (t, m) = if self.root.is_slash() {
                (std::fs::canonicalize(host)?, std::fs::metadata(host)?)
            } else {
                let t = self.root.follow_links(host)?;
                let m = std::fs::symlink_metadata(self.root.resolve(&t))?;
                (t, m)
            };
            kind = EntryKind::from_std(m.file_type());
            target = Some(t);
            meta = Some(m);
        }
        if kind == EntryKind::Dir {
            return Ok(None);
        }
        let mut sysfs_dir = None;
        let (node_type, major, minor) =
            if matches!(kind, EntryKind::CharDevice | EntryKind::BlockDevice) {
                let rdev = match (meta, known_rdev) {
                    (Some(m), _) => m.rdev(),
                    (None, Some(rdev)) => rdev,
                    (None, None) => std::fs::symlink_metadata(self.root.resolve(host))?.rdev(),
                };
                let t = if kind == EntryKind::CharDevice {
                    NodeType::Char
                } else {
                    NodeType::Block
                };
                (t, dev_major(rdev), dev_minor(rdev))
            } else if let Some((major, minor)) = hint {
                (NodeType::Char, major, minor)
            } else if self.index().is_empty() {
                (NodeType::Other, 0, 0)
            } else {
                let index = self.index();
                let lookup = |p: &Path| {
                    p.strip_prefix("/dev")
                        .ok()
                        .and_then(|name| index.get(name))
                        .cloned()
                };
                match target.as_deref().and_then(lookup).or_else(|| lookup(host)) {
                    Some((t, major, minor, dir)) => {
                        sysfs_dir = Some(dir);
                        (t, major, minor)
                    }
                    None => (NodeType::Other, 0, 0),
                }
            };
        Ok(Some((node_type, major, minor, target, sysfs_dir)))
    }

    /// Host path of the sysfs directory of a char/block node, through the
    /// `/sys/dev/{char,block}/<maj>:<min>` link; `None` when there is none.
    pub fn sysfs_dir(&self, node: &DeviceNode) -> Option<PathBuf> {
        let (kind, entries) = match node.node_type {
            NodeType::Char => ("char", &self.char_entries),
            NodeType::Block => ("block", &self.block_entries),
            NodeType::Other => return None,
        };
        let name = format!("{}:{}", node.major, node.minor);
        let listed = entries
            .get_or_init(|| list_names(&self.root.resolve(Path::new(&format!("/sys/dev/{kind}")))));
        if !listed.contains(&name) {
            return None;
        }
        let link = PathBuf::from(format!("/sys/dev/{kind}/{name}"));
        let target = std::fs::read_link(self.root.resolve(&link)).ok()?;
        let dir = link_target_host(&link, &target);
        self.root.resolve(&dir).is_dir().then_some(dir)
    }

    fn index(&mut self) -> &HashMap<PathBuf, (NodeType, u32, u32, PathBuf)> {
        let root = self.root;
        self.index.get_or_insert_with(|| build_dev_index(root))
    }
}

/// The names in folder `dir` (none when it cannot be read).
fn list_names(dir: &Path) -> HashSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// DEVNAME → (type, major, minor, sysfs dir) from `/sys/dev/{char,block}`.
fn build_dev_index(root: &HostRoot) -> HashMap<PathBuf, (NodeType, u32, u32, PathBuf)> {
    let mut index = HashMap::new();
    for (kind, node_type) in [("char", NodeType::Char), ("block", NodeType::Block)] {
        let base = PathBuf::from(format!("/sys/dev/{kind}"));
        let Ok(entries) = std::fs::read_dir(root.resolve(&base)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some((major, minor)) = name.to_str().and_then(parse_devnum) else {
                continue;
            };
            let link = base.join(&name);
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let dir = link_target_host(&link, &target);
            let Ok(uevent) = sysfs::read_string(&root.resolve(&dir.join("uevent"))) else {
                continue;
            };
            if let Some(devname) = sysfs::uevent_value(&uevent, "DEVNAME") {
                index
                    .entry(PathBuf::from(devname))
                    .or_insert((node_type, major, minor, dir));
            }
        }
    }
    index
}

/// Problems met while globbing that did not stop it.
pub(crate) type GlobIssues = Vec<(PathBuf, io::Error)>;

/// Checks a node pattern: absolute and a valid glob.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), HardwareError> {
    if !pattern.starts_with('/') {
        return Err(HardwareError::BadPattern {
            pattern: pattern.to_string(),
            message: "must be an absolute host path".into(),
        });
    }
    parts(pattern).map(drop)
}

/// Options for matching one path component.
const MATCH: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: true,
};

/// One component of a node pattern.
enum Part {
    Literal(String),
    Wild(glob::Pattern),
    /// `**`: this directory and every directory beneath it.
    Recursive,
}

/// Splits and compiles a pattern (already checked to be absolute).
fn parts(pattern: &str) -> Result<Vec<Part>, HardwareError> {
    let mut parts = Vec::new();
    for comp in pattern.split('/').filter(|c| !c.is_empty() && *c != ".") {
        if comp == "**" {
            parts.push(Part::Recursive);
        } else if comp == ".." {
            return Err(HardwareError::BadPattern {
                pattern: pattern.to_string(),
                message: "`..` is not allowed".into(),
            });
        } else if has_glob_meta(comp) {
            let p = glob::Pattern::new(comp).map_err(|e| HardwareError::BadPattern {
                pattern: pattern.to_string(),
                message: e.to_string(),
            })?;
            parts.push(Part::Wild(p));
        } else {
            parts.push(Part::Literal(comp.to_string()));
        }
    }
    Ok(parts)
}

/// Lists the entries of a directory (host path) whose name `wanted`
/// accepts, sorted by name, with each entry's own type when the listing
/// gives it (no `stat`). With `numbers`, each device node's numbers are
/// read too (for 1,024 nodes in `/dev`, most of a poll's scan). A listing
/// for a wildcard (`pattern`) goes through the resolver's
/// [`ListingCache`], when it has one: a watched directory is then read
/// again only after a change under it. Missing or non-directories list as
/// empty; other errors are recorded.
fn list(
    resolver: &NodeResolver<'_>,
    dir: &Path,
    issues: &mut GlobIssues,
    pattern: Option<&str>,
    wanted: &dyn Fn(&str) -> bool,
    numbers: bool,
) -> Arc<[Listed]> {
    let real = resolver.root.resolve(dir);
    let listed = match (resolver.listings, pattern) {
        (Some(cache), Some(pattern)) => cache.read(&real, pattern, wanted, numbers),
        _ => listing::read(&real, wanted, numbers).map(Arc::from),
    };
    listed.unwrap_or_else(|e| {
        if !matches!(
            e.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        ) {
            issues.push((dir.to_path_buf(), e));
        }
        Arc::from(Vec::new())
    })
}

/// Every directory at or beneath `dir` (not following symlinks), `dir` first.
fn descend(
    resolver: &NodeResolver<'_>,
    dir: &Path,
    issues: &mut GlobIssues,
    out: &mut Vec<Reached>,
) {
    out.push((dir.to_path_buf(), None, None));
    let visible = |name: &str| !name.starts_with('.');
    for entry in list(resolver, dir, issues, None, &visible, false).iter() {
        if entry.kind == Some(EntryKind::Dir) {
            descend(resolver, &dir.join(&entry.name), issues, out);
        }
    }
}

/// A host path a glob reached, with its own type (and a device node's
/// `rdev`) when a listing gave it.
type Reached = (PathBuf, Option<EntryKind>, Option<u64>);

/// Globs `pattern` (a host path glob) beneath the root and resolves every
/// match that is not a directory. Sorted by path, unique.
///
/// The walk lists only the directories the pattern's wildcards need, and
/// takes file types from the listings, so a match costs a `stat` only when
/// it is a device node (for its numbers) or a symlink. `*`, `?` and `[…]`
/// match within one component and not a leading `.`; `**` matches any
/// number of directories. Symlinked directories are followed by the kernel
/// except under `**`.
pub(crate) fn glob_resolved(
    resolver: &mut NodeResolver<'_>,
    pattern: &str,
) -> Result<(Vec<ResolvedNode>, GlobIssues), HardwareError> {
    check_pattern(pattern)?;
    let parts = parts(pattern)?;
    let mut issues = Vec::new();
    // Host paths reached so far, with their type (and a device node's
    // numbers) when a listing gave it.
    let mut current: Vec<Reached> = vec![(PathBuf::from("/"), None, None)];
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        for (dir, ft, _) in &current {
            // Only directories (or links that may lead to one) go on.
            if ft.is_some_and(|k| !matches!(k, EntryKind::Dir | EntryKind::Symlink)) {
                continue;
            }
            match part {
                Part::Literal(name) => next.push((dir.join(name), None, None)),
                Part::Recursive => descend(resolver, dir, &mut issues, &mut next),
                Part::Wild(p) => {
                    let wanted = |name: &str| p.matches_with(name, MATCH);
                    let listed = list(resolver, dir, &mut issues, Some(p.as_str()), &wanted, last);
                    for entry in listed.iter() {
                        next.push((dir.join(&entry.name), entry.kind, entry.rdev));
                    }
                }
            }
        }
        current = next;
    }
    // Sorted listings expanded in order give sorted, unique paths; only `**`
    // can reorder or repeat them.
    if parts.iter().any(|p| matches!(p, Part::Recursive)) {
        current.sort_by(|a, b| a.0.cmp(&b.0));
        current.dedup_by(|a, b| a.0 == b.0);
    }
    let mut found = Vec::with_capacity(current.len());
    for (host, ft, rdev) in current {
        match resolver.resolve_listed(host, ft, rdev) {
            Ok(Some(node)) => found.push(node),
            Ok(None) => {}
            // A literal path that is not there is simply not found.
            Err((_, e)) if e.kind() == io::ErrorKind::NotFound && ft.is_none() => {}
            Err(issue) => issues.push(issue),
        }
    }
    Ok((found, issues))
}

/// Device nodes matching `pattern`, a host path glob (`/dev/dri/renderD*`,
/// `/dev/fuse`), beneath the root; sorted by path. Directories are skipped;
/// a literal path that does not exist gives an empty list. See the module
/// docs for how type and numbers are found.
///
/// A match that vanishes while being read, or a dangling symlink, is skipped
/// ([`discover`](crate::discover) reports it as a warning).
///
/// # Errors
/// [`HardwareError::BadPattern`] for a relative or invalid pattern;
/// [`HardwareError::Io`] when a match or directory cannot be read for another
/// reason (e.g. permission denied).
pub fn glob_nodes(root: &HostRoot, pattern: &str) -> Result<Vec<DeviceNode>, HardwareError> {
    let mut resolver = NodeResolver::new(root);
    let (found, issues) = glob_resolved(&mut resolver, pattern)?;
    if let Some((path, source)) = issues
        .into_iter()
        .find(|(_, e)| e.kind() != io::ErrorKind::NotFound)
    {
        return Err(HardwareError::Io { path, source });
    }
    Ok(found.into_iter().map(|r| r.node).collect())
}

#[cfg(test)]
#[path = "nodes_tests.rs"]
mod tests;
