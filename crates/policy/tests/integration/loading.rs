//! What a guest path may be (regular files only, bounded, never blocking),
//! and how much compiled code the engine keeps across many guest builds.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use wdp_guest_artifacts as artifacts;
use wdp_policy::{CallContext, CallLimits, EngineSettings, LoadError, PolicyEngine};

/// Runs `load_file` on a thread and fails the test if it does not answer:
/// a blocking open or an endless read would hang it.
fn load_bounded(engine: &Arc<PolicyEngine>, path: &Path) -> LoadError {
    let (tx, rx) = std::sync::mpsc::channel();
    let (engine, path) = (Arc::clone(engine), path.to_owned());
    std::thread::spawn(move || {
        let _ = tx.send(engine.load_file(&path).map(drop));
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("load_file blocked or read without end")
        .expect_err("a special file loaded as a guest")
}

fn small_engine(unused_cache_bytes: u64) -> Arc<PolicyEngine> {
    Arc::new(
        PolicyEngine::new(EngineSettings {
            max_instances: 8,
            unused_cache_bytes,
            ..EngineSettings::default()
        })
        .unwrap(),
    )
}

#[test]
fn special_files_are_refused_by_name_without_blocking() {
    let engine = small_engine(0);
    let dir = tempfile::tempdir().unwrap();

    let err = load_bounded(&engine, Path::new("/dev/zero"));
    assert!(
        matches!(
            err,
            LoadError::NotAFile {
                kind: "a character device",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("/dev/zero"), "{err}");

    let fifo = dir.path().join("guest.wasm");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let err = load_bounded(&engine, &fifo);
    assert!(
        matches!(err, LoadError::NotAFile { kind: "a FIFO", .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("guest.wasm"), "{err}");

    // Through a symlink, as ConfigMap volumes present files.
    let link = dir.path().join("link.wasm");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let err = load_bounded(&engine, &link);
    assert!(matches!(err, LoadError::NotAFile { .. }), "{err:?}");
    assert!(err.to_string().contains("link.wasm"), "{err}");

    let err = load_bounded(&engine, dir.path());
    assert!(
        matches!(
            err,
            LoadError::NotAFile {
                kind: "a directory",
                ..
            }
        ),
        "{err:?}"
    );

    let huge = dir.path().join("huge.wasm");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(wdp_policy::MAX_GUEST_FILE_BYTES + 1).unwrap();
    let err = load_bounded(&engine, &huge);
    assert!(matches!(err, LoadError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("huge.wasm"), "{err}");

    // A symlink to a real guest loads.
    let good = dir.path().join("good.wasm");
    std::os::unix::fs::symlink(artifacts::ALLOCATE_SHAPER, &good).unwrap();
    engine.load_file(&good).unwrap();
}

/// `base` plus a custom section holding `n`: a distinct build.
fn distinct_build(base: &[u8], n: u8) -> Vec<u8> {
    let name = b"wdp-test-build";
    let mut bytes = base.to_vec();
    bytes.push(0); // custom section id
    bytes.push((1 + name.len() + 1) as u8);
    bytes.push(name.len() as u8);
    bytes.extend_from_slice(name);
    bytes.push(n);
    bytes
}

#[test]
fn unused_builds_are_bounded_by_bytes_and_dropped_on_request() {
    let base = std::fs::read(artifacts::ALLOCATE_SHAPER).unwrap();
    let probe = small_engine(0).load_bytes("probe", &base).unwrap();
    let one = probe.compiled_bytes();
    assert!(one > 0);
    // Room for three unused builds.
    let engine = small_engine(3 * one + one / 2);
    let ctx = CallContext::new(CallLimits::default());

    let in_use = engine
        .load_bytes("in-use", &distinct_build(&base, 0))
        .unwrap();
    for n in 1..=20 {
        let guest = engine
            .load_bytes("edit", &distinct_build(&base, n))
            .unwrap();
        guest.smoke_test(&ctx).unwrap();
    }
    let stats = engine.cache_stats();
    assert_eq!(stats.unused_entries, 3, "{stats:?}");
    assert!(stats.unused_bytes <= 3 * one + one / 2, "{stats:?}");
    // The guest in use is still alive and found: loading it again shares it.
    assert_eq!(stats.live_entries, 4, "{stats:?}");
    let again = engine
        .load_bytes("in-use", &distinct_build(&base, 0))
        .unwrap();
    assert_eq!(engine.cache_stats().live_entries, 4);
    assert_eq!(again.content_hash(), in_use.content_hash());

    // After a reload the host keeps only what its resources use.
    let keep = in_use.content_hash().to_owned();
    engine.retain_compiled(|hash| hash == keep);
    let stats = engine.cache_stats();
    assert_eq!(stats.unused_entries, 0, "{stats:?}");
    assert_eq!(stats.live_entries, 1, "{stats:?}");
    drop((in_use, again));
    assert_eq!(engine.cache_stats().unused_entries, 1);
    engine.retain_compiled(|_| false);
    assert_eq!(engine.cache_stats(), wdp_policy::CacheStats::default());
}

/// A host whose configuration names no guest never pays for the Wasm
/// engine: it is created by the first load that gets as far as compiling,
/// not by `PolicyEngine::new`, nor by a file refused before compiling.
#[test]
fn the_wasm_engine_is_created_by_the_first_compiling_load() {
    let engine = small_engine(0);
    assert!(!engine.is_created(), "created before any load");

    let refused = load_bounded(&engine, Path::new("/dev/zero"));
    assert!(matches!(refused, LoadError::NotAFile { .. }), "{refused:?}");
    assert!(
        !engine.is_created(),
        "created by a load refused before compiling"
    );

    let bytes = std::fs::read(artifacts::PRESENCE_HEALTH).unwrap();
    engine.load_bytes("health.wasm", &bytes).unwrap();
    assert!(engine.is_created());
}
