//! The precompiled-guest directory: filled on a compile, private, used by
//! the next engine, and a damaged file is compiled again and replaced.

use std::os::unix::fs::PermissionsExt;

use wdp_guest_artifacts as artifacts;
use wdp_policy::{EngineSettings, Hook, PolicyEngine};

fn engine(dir: &std::path::Path) -> PolicyEngine {
    PolicyEngine::new(EngineSettings {
        max_instances: 4,
        precompiled_cache_dir: Some(dir.to_owned()),
        ..EngineSettings::default()
    })
    .unwrap()
}

#[test]
fn compiled_guests_are_kept_private_and_reused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("precompiled");
    let bytes = std::fs::read(artifacts::PRESENCE_HEALTH).unwrap();

    let first = engine(&dir);
    let path = first.precompiled_path(&bytes).unwrap();
    assert!(path.starts_with(&dir), "{}", path.display());
    let guest = first.load_bytes("health.wasm", &bytes).unwrap();
    assert!(guest.exports(Hook::Health));
    drop(guest);
    drop(first);
    // Written by the time the engine is gone, in a folder only we may use.
    let written = std::fs::read(&path).unwrap();
    assert!(!written.is_empty());
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);

    // A damaged file is refused, the guest compiled again and the file
    // replaced by a good one.
    std::fs::write(&path, b"not a compiled component").unwrap();
    let second = engine(&dir);
    let guest = second.load_bytes("health.wasm", &bytes).unwrap();
    assert!(guest.exports(Hook::Health));
    drop(guest);
    drop(second);
    assert_eq!(std::fs::read(&path).unwrap(), written);

    // An intact file is mapped: the next engine loads the same build.
    let third = engine(&dir);
    let guest = third.load_bytes("health.wasm", &bytes).unwrap();
    assert_eq!(
        guest.content_hash(),
        wdp_policy::guest_file_hash(std::path::Path::new(artifacts::PRESENCE_HEALTH)).unwrap()
    );
}

#[test]
fn an_unusable_directory_only_costs_the_disk_cache() {
    let tmp = tempfile::tempdir().unwrap();
    // A file where the directory should be: created neither here nor there.
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, b"").unwrap();
    let engine = engine(&blocker.join("precompiled"));
    let bytes = std::fs::read(artifacts::PRESENCE_HEALTH).unwrap();
    assert!(engine.precompiled_path(&bytes).is_none());
    engine.load_bytes("health.wasm", &bytes).unwrap();
}
