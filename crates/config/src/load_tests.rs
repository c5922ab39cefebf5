use std::process::Command;
use std::time::Duration;

use super::*;

const FUSE: &str =
    "version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\n";

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success());
}

/// Runs `load_dir` on a thread and fails the test if it does not
/// answer (a blocking read would hang it forever).
fn load_dir_bounded(dir: &Path) -> Result<ConfigSet, ConfigError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let dir = dir.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(load_dir(&dir));
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("load_dir blocked on a special file")
}

#[test]
fn a_fifo_named_toml_is_refused_by_name_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fuse.toml"), FUSE).unwrap();
    mkfifo(&dir.path().join("x.toml"));
    let err = load_dir_bounded(dir.path()).unwrap_err();
    assert!(
        matches!(err, ConfigError::NotAFile { kind: "a FIFO", .. }),
        "{err:?}"
    );
    let err = err.to_string();
    assert!(err.contains("x.toml"), "{err}");
    assert!(err.contains("FIFO"), "{err}");

    // Also when host.toml is the FIFO, and through a symlink.
    std::fs::remove_file(dir.path().join("x.toml")).unwrap();
    mkfifo(&dir.path().join("pipe"));
    std::os::unix::fs::symlink("pipe", dir.path().join("host.toml")).unwrap();
    let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
    assert!(err.contains("host.toml"), "{err}");
    assert!(err.contains("FIFO"), "{err}");
}

#[test]
fn directories_and_devices_named_toml_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d.toml")).unwrap();
    let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("d.toml") && err.contains("a directory"),
        "{err}"
    );
    std::fs::remove_dir(dir.path().join("d.toml")).unwrap();

    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).unwrap();
    let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("zero.toml") && err.contains("a character device"),
        "{err}"
    );
}

#[test]
fn a_huge_config_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.toml");
    let file = std::fs::File::create(&big).unwrap();
    // Sparse: no disk used, but far above the limit.
    file.set_len(MAX_CONFIG_FILE_BYTES * 1024).unwrap();
    let err = load_dir_bounded(dir.path()).unwrap_err();
    assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("big.toml"), "{err}");
}

#[test]
fn configmap_symlinks_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("..data")).unwrap();
    std::fs::write(dir.path().join("..data/fuse.toml"), FUSE).unwrap();
    std::os::unix::fs::symlink("..data/fuse.toml", dir.path().join("fuse.toml")).unwrap();
    let set = load_dir_bounded(dir.path()).unwrap();
    assert!(set.resources.contains_key("example.com/fuse"));
}

/// A directory with the default set (fuse) and set `loops` (loop).
fn with_sets() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fuse.toml"), FUSE).unwrap();
    std::fs::create_dir_all(dir.path().join("sets/loops")).unwrap();
    std::fs::write(
        dir.path().join("sets/loops/loop.toml"),
        "version = 1\nresource = \"example.com/loop\"\n[[nodes]]\npath = \"/dev/loop*\"\n",
    )
    .unwrap();
    dir
}

#[test]
fn a_named_set_is_its_own_resource_files_with_the_top_host_settings() {
    let dir = with_sets();
    std::fs::write(
        dir.path().join(HOST_FILE),
        "version = 1\npoll-interval-ms = 1234\n",
    )
    .unwrap();
    let default = load_dir(dir.path()).unwrap();
    let loops = load_set(dir.path(), Some("loops")).unwrap();
    assert_eq!(default.set, None);
    assert_eq!(loops.set.as_deref(), Some("loops"));
    assert_eq!(
        default.resources.keys().collect::<Vec<_>>(),
        ["example.com/fuse"]
    );
    assert_eq!(
        loops.resources.keys().collect::<Vec<_>>(),
        ["example.com/loop"]
    );
    assert_eq!(loops.host.poll_interval_ms, 1234);
    assert_ne!(default.digest, loops.digest);
    assert_eq!(
        loops.digest,
        load_set(dir.path(), Some("loops")).unwrap().digest
    );
    assert!(loops.digest.starts_with("sha256:"), "{}", loops.digest);
}

#[test]
fn an_unknown_set_a_host_file_in_a_set_and_a_bad_set_name_are_refused_by_name() {
    let dir = with_sets();
    let unknown = load_set(dir.path(), Some("training"))
        .unwrap_err()
        .to_string();
    assert!(
        unknown.contains("no configuration set `training`")
            && unknown.contains("sets: default, loops"),
        "{unknown}"
    );
    std::fs::write(dir.path().join("sets/loops/host.toml"), "version = 1\n").unwrap();
    let host = load_set(dir.path(), Some("loops")).unwrap_err().to_string();
    assert!(
        host.contains("sets/loops/host.toml") && host.contains("shared by every"),
        "{host}"
    );
    std::fs::create_dir_all(dir.path().join("sets/-bad")).unwrap();
    let name = load_set(dir.path(), Some("-bad")).unwrap_err().to_string();
    assert!(name.contains("configuration set name `-bad`"), "{name}");
}

#[test]
fn a_folder_that_cannot_name_a_set_is_refused_alone() {
    let dir = with_sets();
    for bad in ["default", "-bad"] {
        std::fs::create_dir_all(dir.path().join("sets").join(bad)).unwrap();
        std::fs::write(dir.path().join("sets").join(bad).join("shared.toml"), FUSE).unwrap();
    }
    // The default set and every other set load as before.
    assert_eq!(load_dir(dir.path()).unwrap().resources.len(), 1);
    let loops = load_set(dir.path(), Some("loops")).unwrap();
    assert_eq!(
        loops.resources.keys().collect::<Vec<_>>(),
        ["example.com/loop"]
    );
    let found = super::super::sets::scan_sets(dir.path()).unwrap();
    assert_eq!(found.sets, ["loops"]);
    assert_eq!(
        found
            .refused
            .iter()
            .map(|r| r.0.as_str())
            .collect::<Vec<_>>(),
        ["-bad", "default"]
    );
    assert!(!found.sets.is_empty() && found.any());
    // Each folder refused by name; `check` (named_sets) refuses the whole.
    let default = load_set(dir.path(), Some("default"))
        .unwrap_err()
        .to_string();
    assert!(
        default.contains("sets: configuration set name `default`"),
        "{default}"
    );
    let whole = super::super::sets::named_sets(dir.path()).unwrap_err();
    assert!(whole.to_string().contains("`-bad`"), "{whole}");
}

#[test]
fn host_settings_are_read_alone_as_the_whole_directory_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    // No host.toml: the defaults, whatever the resource files hold.
    std::fs::write(dir.path().join("broken.toml"), "version = \n").unwrap();
    assert_eq!(
        load_host_settings(dir.path())
            .unwrap()
            .precompiled_cache_dir,
        None
    );
    std::fs::write(
        dir.path().join(HOST_FILE),
        "version = 1\nprecompiled-cache-dir = \"compiled\"\n",
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("broken.toml")).unwrap();
    std::fs::write(dir.path().join("fuse.toml"), FUSE).unwrap();
    let alone = load_host_settings(dir.path()).unwrap();
    assert!(alone.precompiled_cache_dir.is_some());
    assert_eq!(
        alone.precompiled_cache_dir,
        load_dir(dir.path()).unwrap().host.precompiled_cache_dir
    );
    // A bad host.toml is refused by file and field, as load_dir refuses it.
    std::fs::write(dir.path().join(HOST_FILE), "version = 1\nno-such-key = 1\n").unwrap();
    let err = load_host_settings(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("host.toml") && err.contains("no-such-key"),
        "{err}"
    );
    std::fs::write(dir.path().join(HOST_FILE), "version = 2\n").unwrap();
    let err = load_host_settings(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("host.toml") && err.contains("version"),
        "{err}"
    );
}
