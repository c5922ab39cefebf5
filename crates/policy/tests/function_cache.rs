//! The function cache beside the precompiled guests: a new build of a
//! known guest reuses the functions compiled before (in this engine or an
//! earlier one), behaves exactly as a whole compile would, and damaged
//! entries only cost the compile.

mod common;

use std::path::Path;

use common::{ctx, device_ref, pairs};
use wdp_guest_artifacts as artifacts;
use wdp_policy::{ContainerResponse, EngineSettings, Guest, PolicyEngine};

fn engine(dir: &Path) -> PolicyEngine {
    PolicyEngine::new(EngineSettings {
        max_instances: 4,
        precompiled_cache_dir: Some(dir.to_owned()),
        ..EngineSettings::default()
    })
    .unwrap()
}

/// The component with a custom section appended: new bytes (a new content
/// hash, so a new build to compile), the same code.
fn with_tag(component: &[u8], tag: u8) -> Vec<u8> {
    let mut out = component.to_vec();
    out.extend_from_slice(&[0, 3, 1, b't', tag]);
    out
}

fn visible_devices(guest: &Guest) -> Vec<(String, String)> {
    let devices = vec![device_ref("gpu0", 0, &[]), device_ref("gpu1", 0, &[])];
    guest
        .allocate(
            &ctx(&[("env-prefix", "P")]),
            &devices,
            &ContainerResponse::default(),
        )
        .unwrap()
        .envs
}

fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("functions")).unwrap().count()
}

#[test]
fn a_new_build_of_a_known_guest_reuses_its_compiled_functions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("precompiled");
    let shaper = std::fs::read(artifacts::ALLOCATE_SHAPER).unwrap();
    let expected = pairs(&[("P_VISIBLE_DEVICES", "gpu0,gpu1")]);

    let first = engine(&dir);
    let guest = first
        .load_bytes("shaper.wasm", &with_tag(&shaper, 1))
        .unwrap();
    let stored = entries(&dir);
    assert!(stored > 0, "no compiled function kept");
    // Identical functions within one component are compiled once.
    let reused_within = first.reused_functions();
    assert_eq!(visible_devices(&guest), expected);

    // Another build with the same code: every function comes from disk.
    let guest = first
        .load_bytes("shaper.wasm", &with_tag(&shaper, 2))
        .unwrap();
    let reused = first.reused_functions() - reused_within;
    assert!(
        reused > stored as u64 / 2,
        "{reused} of {stored} known functions reused"
    );
    assert_eq!(visible_devices(&guest), expected);
    drop((guest, first));

    // So in the next process too.
    let second = engine(&dir);
    let guest = second
        .load_bytes("shaper.wasm", &with_tag(&shaper, 3))
        .unwrap();
    assert!(second.reused_functions() > 0);
    assert_eq!(visible_devices(&guest), expected);
}

#[test]
fn damaged_entries_are_compiled_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("precompiled");
    let shaper = std::fs::read(artifacts::ALLOCATE_SHAPER).unwrap();
    drop(engine(&dir).load_bytes("shaper.wasm", &with_tag(&shaper, 1)));
    for entry in std::fs::read_dir(dir.join("functions")).unwrap() {
        std::fs::write(entry.unwrap().path(), b"not a compiled function").unwrap();
    }
    let engine = engine(&dir);
    let guest = engine
        .load_bytes("shaper.wasm", &with_tag(&shaper, 2))
        .unwrap();
    assert_eq!(
        visible_devices(&guest),
        pairs(&[("P_VISIBLE_DEVICES", "gpu0,gpu1")])
    );
    // The damaged entries this build needed were replaced by good ones.
    engine.wait_for_function_cache();
    let (mut damaged, mut total) = (0, 0);
    for entry in std::fs::read_dir(dir.join("functions")).unwrap() {
        total += 1;
        if std::fs::read(entry.unwrap().path()).unwrap() == b"not a compiled function" {
            damaged += 1;
        }
    }
    assert!(
        damaged < total / 2,
        "{damaged} of {total} entries still damaged"
    );
}

#[test]
fn without_a_precompiled_directory_nothing_is_kept() {
    let engine = PolicyEngine::new(EngineSettings {
        max_instances: 4,
        ..EngineSettings::default()
    })
    .unwrap();
    let shaper = std::fs::read(artifacts::ALLOCATE_SHAPER).unwrap();
    engine.load_bytes("a.wasm", &with_tag(&shaper, 1)).unwrap();
    engine.load_bytes("b.wasm", &with_tag(&shaper, 2)).unwrap();
    assert_eq!(engine.reused_functions(), 0);
}
