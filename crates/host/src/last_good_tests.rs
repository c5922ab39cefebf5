use std::collections::BTreeMap;

use super::*;

const GUESTED: &str = "version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\n\
                       [hooks.allocate]\nguest = \"guests/a.wasm\"\n";

/// A config directory with one resource whose allocate guest is
/// `guests/a.wasm` (any bytes: nothing here compiles it).
fn live() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("guests")).unwrap();
    std::fs::write(dir.path().join("guests/a.wasm"), b"first build").unwrap();
    std::fs::write(dir.path().join("fuse.toml"), GUESTED).unwrap();
    std::fs::write(
        dir.path().join("host.toml"),
        "version = 1\npoll-interval-ms = 1234\n",
    )
    .unwrap();
    dir
}

#[test]
fn the_snapshot_serves_its_own_guest_copy_pinned_whatever_the_directory_holds_now() {
    let (dir, state) = (live(), tempfile::tempdir().unwrap());
    assert!(load(state.path(), dir.path()).unwrap().is_none());
    let config = wdp_config::load_dir(dir.path()).unwrap();
    assert!(save(state.path(), &config, &BTreeMap::new()).unwrap());
    // The same configuration again: nothing written.
    assert!(!save(state.path(), &config, &BTreeMap::new()).unwrap());

    // The directory broken and the guest gone.
    std::fs::write(dir.path().join("fuse.toml"), "version = 1\nresource = 7\n").unwrap();
    std::fs::remove_file(dir.path().join("guests/a.wasm")).unwrap();
    let snapshot = load(state.path(), dir.path()).unwrap().unwrap();
    assert_eq!(snapshot.digest, config.digest);
    assert_eq!(snapshot.dir, dir.path());
    assert_eq!(snapshot.host.poll_interval_ms, 1234);
    let binding = &snapshot.resources["example.com/fuse"].hooks[0];
    assert!(
        binding.guest.starts_with(snapshot_dir(state.path())),
        "{binding:?}"
    );
    assert_eq!(std::fs::read(&binding.guest).unwrap(), b"first build");
    assert_eq!(
        binding.sha256.as_deref(),
        Some(
            wdp_policy::guest_file_hash(&binding.guest)
                .unwrap()
                .as_str()
        )
    );
}

#[test]
fn a_guest_changed_since_it_was_served_is_not_kept() {
    let (dir, state) = (live(), tempfile::tempdir().unwrap());
    let config = wdp_config::load_dir(dir.path()).unwrap();
    let served: BTreeMap<PathBuf, String> =
        [(dir.path().join("guests/a.wasm"), "0".repeat(64))].into();
    let error = save(state.path(), &config, &served).unwrap_err();
    assert!(matches!(error, LastGoodError::Differs { .. }), "{error}");
    assert!(!exists(state.path()));
}

#[test]
fn a_damaged_snapshot_is_refused_by_name() {
    let (dir, state) = (live(), tempfile::tempdir().unwrap());
    let config = wdp_config::load_dir(dir.path()).unwrap();
    save(state.path(), &config, &BTreeMap::new()).unwrap();
    let generation = current(state.path()).unwrap();
    std::fs::write(
        generation.join("files/fuse.toml"),
        GUESTED.replace("fuse\"", "fuse2\""),
    )
    .unwrap();
    let error = load(state.path(), dir.path()).unwrap_err().to_string();
    assert!(error.contains("differs from what was served"), "{error}");
}
