//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use wdp_hardware::{Candidate, HostRoot, Scan};

/// Path of a committed fixture tree.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures")).join(name)
}

/// Host root of a committed fixture tree.
pub fn fixture_root(name: &str) -> HostRoot {
    HostRoot::new(fixture(name))
}

/// Copies a tree, keeping symlinks as symlinks.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for entry in std::fs::read_dir(src).unwrap() {
        let entry = entry.unwrap();
        let to = dst.join(entry.file_name());
        let ft = entry.file_type().unwrap();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path()).unwrap(), &to).unwrap();
        } else if ft.is_dir() {
            copy_tree(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).unwrap();
        }
    }
}

/// A writable copy of a fixture tree in a temp dir.
pub fn fixture_copy(name: &str) -> (tempfile::TempDir, HostRoot) {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(name), dir.path());
    let root = HostRoot::new(dir.path());
    (dir, root)
}

/// Ids of a scan's candidates.
pub fn ids(scan: &Scan) -> Vec<&str> {
    scan.candidates.iter().map(|c| c.id.as_str()).collect()
}

/// The candidate with `id`.
pub fn find<'a>(scan: &'a Scan, id: &str) -> &'a Candidate {
    scan.candidates
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no candidate {id} in {:?}", ids(scan)))
}

/// Node paths of a candidate, as strings.
pub fn node_paths(c: &Candidate) -> Vec<String> {
    c.nodes
        .iter()
        .map(|n| n.path.to_string_lossy().into_owned())
        .collect()
}
