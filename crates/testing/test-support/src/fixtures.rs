//! The repository's fixture host trees (`tests/fixtures/`), and files
//! written under a scratch host root.

use std::path::{Path, PathBuf};

/// The repository's root folder (where `tests/` and `config/` are).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The fixture host tree `tests/fixtures/<name>`.
pub fn fixture(name: &str) -> PathBuf {
    repo_root().join("tests/fixtures").join(name)
}

/// Copies the fixture host tree `tests/fixtures/<name>` into `dest`
/// (created if missing) with `cp -a`, so symlinks stay symlinks as sysfs
/// has them and a test may then unplug and re-plug its hardware.
pub fn copy_fixture(name: &str, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    let mut source = fixture(name).into_os_string();
    source.push("/.");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(source)
        .arg(dest)
        .status()
        .unwrap();
    assert!(status.success(), "copying fixture {name}");
}

/// Where the host path `path` (absolute, as a guest or config names it)
/// lies under the host root `root`.
pub fn under_root(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Writes `contents` at host path `path` under the host root `root`,
/// creating its parents: a fake device node (empty) or a sysfs attribute.
pub fn write_under_root(root: &Path, path: &str, contents: impl AsRef<[u8]>) {
    let real = under_root(root, path);
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(real, contents).unwrap();
}
