//! Hostile guests fail only their own call, with the right kind and a
//! message naming guest and hook; the guest and the engine keep serving.
//! Calls work from `spawn_blocking` and from many threads at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{
    CallContext, CallError, CallErrorKind, CallEvent, ContainerResponse, DeviceFacts,
    EngineSettings, Guest, Hook, PolicyEngine, PreferredRequest,
};

/// Calls `hook` with non-empty input (hostile guests misbehave only then).
fn call_with_work(guest: &Guest, hook: Hook, c: &CallContext) -> Result<(), CallError> {
    let candidate = pci("0000:3b:00.0", "0x10de", "0x030200", Some("nvidia"), 0);
    let device = device_ref("gpu0", 0, &[]);
    match hook {
        Hook::Discovery => guest.discover(c, &[candidate]).map(drop),
        Hook::Health => guest
            .check_health(
                c,
                &[DeviceFacts {
                    device: wdp_policy::Device {
                        id: "gpu0".into(),
                        candidates: vec![candidate.id.clone()],
                        ..Default::default()
                    },
                    candidates: vec![candidate],
                }],
            )
            .map(drop),
        Hook::PreferredAllocation => guest
            .choose(
                c,
                &PreferredRequest {
                    available: vec![device],
                    must_include: vec![],
                    size: 1,
                },
            )
            .map(drop),
        Hook::Allocate => guest
            .allocate(c, &[device], &ContainerResponse::default())
            .map(drop),
        Hook::PreStart => guest.pre_start(c, &[device]),
        Hook::DraLayout => guest
            .describe_layout(
                c,
                &[wdp_policy::Device {
                    id: "gpu0".into(),
                    candidates: vec![candidate.id],
                    ..Default::default()
                }],
            )
            .map(drop),
        Hook::DraPrepare => guest.dra_prepare(c, &[claim_device()]).map(drop),
        Hook::DraUnprepare => guest.dra_unprepare(c, &[claim_device()]),
        Hook::DeviceTaints | Hook::DeviceTaintsV2 => guest
            .taints(
                c,
                &[DeviceFacts {
                    device: wdp_policy::Device {
                        id: "gpu0".into(),
                        candidates: vec![candidate.id.clone()],
                        ..Default::default()
                    },
                    candidates: vec![candidate],
                }],
            )
            .map(drop),
        Hook::Passthrough => guest.may_bind(c, &wdp_policy::BindRequest::default()),
    }
}

fn claim_device() -> wdp_policy::ClaimDevice {
    wdp_policy::ClaimDevice {
        id: "gpu0".into(),
        device_id: "gpu0".into(),
        request: "gpu".into(),
        ..Default::default()
    }
}

/// The hooks a hostile guest exports, and so misbehaves in: the five of
/// the device-plugin path (not the DRA hooks of WIT 0.1.2).
fn hostile_hooks(guest: &Guest) -> Vec<Hook> {
    assert_eq!(guest.hooks(), &Hook::ALL[..5], "{}", guest.name());
    guest.hooks().to_vec()
}

/// A good call on another guest, and a polite call on the hostile one.
fn still_serving(hostile: &Guest) {
    let packing = load(artifacts::NUMA_PACKING);
    let request = PreferredRequest {
        available: vec![device_ref("a", 0, &[]), device_ref("b", 0, &[])],
        must_include: vec!["b".into()],
        size: 1,
    };
    assert_eq!(packing.choose(&ctx(&[]), &request).unwrap(), ["b"]);
    hostile.smoke_test(&ctx(&[])).unwrap();
}

fn assert_names(error: &CallError, guest_file: &str, hook: Hook) {
    let message = error.to_string();
    assert!(
        message.contains(&format!("guest \"{guest_file}\"")),
        "{message}"
    );
    assert!(message.contains(&format!("hook {hook}")), "{message}");
    assert_eq!(error.hook(), hook);
    assert_eq!(error.guest(), guest_file);
}

#[test]
fn an_infinite_loop_times_out_in_every_hook() {
    let guest = load(artifacts::HOSTILE_INFINITE_LOOP);
    let c = ctx_with(Arc::default(), &[], limits(150, 64));
    for hook in hostile_hooks(&guest) {
        let started = Instant::now();
        let error = call_with_work(&guest, hook, &c).unwrap_err();
        let elapsed = started.elapsed();
        assert_eq!(error.kind(), CallErrorKind::Timeout, "{error}");
        assert_names(&error, "hostile_infinite_loop.wasm", hook);
        assert!(
            error.to_string().ends_with("timed out after 150 ms"),
            "{error}"
        );
        assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    }
    still_serving(&guest);
}

#[test]
fn a_memory_bomb_runs_out_of_memory_in_every_hook() {
    let guest = load(artifacts::HOSTILE_MEMORY_BOMB);
    let c = ctx_with(Arc::default(), &[], limits(5_000, 32));
    for hook in hostile_hooks(&guest) {
        let error = call_with_work(&guest, hook, &c).unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::OutOfMemory, "{error}");
        assert_names(&error, "hostile_memory_bomb.wasm", hook);
        assert!(error.to_string().contains("limit 32 MiB"), "{error}");
    }
    still_serving(&guest);
}

#[test]
fn a_panic_is_a_trap_that_carries_the_panic_message() {
    let guest = load(artifacts::HOSTILE_TRAP);
    for hook in hostile_hooks(&guest) {
        let error = call_with_work(&guest, hook, &ctx(&[])).unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::Trap, "{error}");
        assert_names(&error, "hostile_trap.wasm", hook);
        let message = error.to_string();
        assert!(
            message.contains(&format!("panics on purpose in hook {hook}")),
            "{message}"
        );
    }
    still_serving(&guest);
}

#[test]
fn sleeping_traps_at_once_instead_of_blocking_the_thread() {
    let guest = load(artifacts::HOSTILE_SLEEPER);
    let c = ctx_with(Arc::default(), &[], limits(10_000, 64));
    for hook in hostile_hooks(&guest) {
        let started = Instant::now();
        let error = call_with_work(&guest, hook, &c).unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::Trap, "{error}");
        assert_names(&error, "hostile_sleeper.wasm", hook);
        assert!(error.to_string().contains("tried to block"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    still_serving(&guest);
}

#[test]
fn only_guests_importing_hardware_may_block_in_the_host() {
    // Attribute reads touch sysfs: such a guest's calls may block.
    assert!(load(artifacts::PRE_START_CHECK).may_block_in_host());
    // Compute only (WASI's blocking calls trap): calls end by the deadline.
    for compute_only in [
        artifacts::NUMA_PACKING,
        artifacts::ALLOCATE_SHAPER,
        artifacts::HOSTILE_INFINITE_LOOP,
        artifacts::HOSTILE_SLEEPER,
    ] {
        assert!(!load(compute_only).may_block_in_host(), "{compute_only}");
    }
}

#[test]
fn nonsense_comes_back_unvalidated_and_long_messages_are_cut() {
    // The runtime hands answers back as they are: validating them is the
    // host's job. Only a guest's error text is bounded here.
    let guest = load(artifacts::HOSTILE_NONSENSE);
    let c = ctx(&[]);
    let devices = guest
        .discover(&c, &[pci("0000:3b:00.0", "0x10de", "0x030200", None, 0)])
        .unwrap();
    assert_eq!(devices[0].id, devices[1].id);
    assert!(devices.iter().any(|d| d.id.len() > 63));
    let ids = guest
        .choose(
            &c,
            &PreferredRequest {
                available: vec![device_ref("a", 0, &[]), device_ref("b", 0, &[])],
                must_include: vec!["b".into()],
                size: 2,
            },
        )
        .unwrap();
    assert_eq!(ids.len(), 3);
    let response = guest
        .allocate(
            &c,
            &[device_ref("a", 0, &[])],
            &ContainerResponse::default(),
        )
        .unwrap();
    assert!(
        response
            .mounts
            .iter()
            .any(|m| !m.host_path.starts_with('/'))
    );
    let error = guest.pre_start(&c, &[device_ref("a", 0, &[])]).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert!(
        error.to_string().len() < 5_000,
        "{}",
        error.to_string().len()
    );
}

#[test]
fn a_hook_the_guest_lacks_is_not_exported() {
    let guest = load(artifacts::PCI_FILTER);
    let error = guest.pre_start(&ctx(&[]), &[]).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::NotExported);
    assert_eq!(
        error.to_string(),
        "guest \"pci_filter.wasm\" does not export hook pre-start"
    );
}

#[test]
fn calls_work_from_spawn_blocking_on_a_multi_thread_runtime() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let health = load(artifacts::PRESENCE_HEALTH);
        let trap = load(artifacts::HOSTILE_TRAP);
        let sleeper = load(artifacts::HOSTILE_SLEEPER);
        let good = tokio::task::spawn_blocking(move || {
            health.check_health(
                &ctx(&[]),
                &[DeviceFacts {
                    device: wdp_policy::Device {
                        id: "gpu0".into(),
                        ..Default::default()
                    },
                    candidates: vec![],
                }],
            )
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(good.len(), 1);
        // A panicking guest writes to stderr (a WASI stream) inside the
        // runtime's context: must not panic the host (wasmtime#11339).
        let trapped =
            tokio::task::spawn_blocking(move || call_with_work(&trap, Hook::Allocate, &ctx(&[])))
                .await
                .unwrap()
                .unwrap_err();
        assert_eq!(trapped.kind(), CallErrorKind::Trap);
        let slept =
            tokio::task::spawn_blocking(move || call_with_work(&sleeper, Hook::Health, &ctx(&[])))
                .await
                .unwrap()
                .unwrap_err();
        assert_eq!(slept.kind(), CallErrorKind::Trap);
    });
}

#[test]
fn many_threads_call_at_once_while_a_guest_loops() {
    let packing = load(artifacts::NUMA_PACKING);
    let looping = load(artifacts::HOSTILE_INFINITE_LOOP);
    let ok = Arc::new(AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for _ in 0..2 {
            let looping = Arc::clone(&looping);
            scope.spawn(move || {
                let c = ctx_with(Arc::default(), &[], limits(300, 64));
                let error = call_with_work(&looping, Hook::PreferredAllocation, &c).unwrap_err();
                assert_eq!(error.kind(), CallErrorKind::Timeout);
            });
        }
        for thread in 0..4 {
            let packing = Arc::clone(&packing);
            let ok = Arc::clone(&ok);
            scope.spawn(move || {
                for i in 0..25 {
                    let request = PreferredRequest {
                        available: (0..16)
                            .map(|d| device_ref(&format!("t{thread}-{i}-{d}"), d % 2, &[]))
                            .collect(),
                        must_include: vec![format!("t{thread}-{i}-3")],
                        size: 4,
                    };
                    let chosen = packing.choose(&ctx(&[]), &request).unwrap();
                    assert_eq!(chosen.len(), 4);
                    assert_eq!(chosen[0], format!("t{thread}-{i}-3"));
                    ok.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert_eq!(ok.load(Ordering::SeqCst), 100);
}

#[test]
fn observer_sees_every_call_and_precompiled_cache_fills() {
    type Seen = Vec<(Hook, Option<CallErrorKind>)>;
    let events: Arc<Mutex<Seen>> = Arc::default();
    let seen = Arc::clone(&events);
    let cache = tempfile::tempdir().unwrap();
    let engine = PolicyEngine::new(EngineSettings {
        max_instances: 8,
        precompiled_cache_dir: Some(cache.path().join("precompiled")),
        observer: Some(Arc::new(move |event: &CallEvent<'_>| {
            assert_eq!(event.guest, "trap.wasm");
            assert_eq!(event.resource, "example.com/gpu");
            seen.lock().unwrap().push((event.hook, event.error));
        })),
        ..EngineSettings::default()
    })
    .unwrap();
    let bytes = std::fs::read(artifacts::HOSTILE_TRAP).unwrap();
    let guest = engine.load_bytes("trap.wasm", &bytes).unwrap();
    guest.smoke_test(&ctx(&[])).unwrap();
    let _ = call_with_work(&guest, Hook::Health, &ctx(&[]));
    let events = events.lock().unwrap();
    assert_eq!(events.len(), 6);
    assert_eq!(events[5], (Hook::Health, Some(CallErrorKind::Trap)));
    assert!(events[..5].iter().all(|(_, error)| error.is_none()));
    drop(guest);
    drop(engine);

    // A second engine loads from the on-disk cache.
    let files = walk(&cache.path().join("precompiled"));
    assert!(files > 0, "nothing cached");
    let engine = PolicyEngine::new(EngineSettings {
        max_instances: 8,
        precompiled_cache_dir: Some(cache.path().join("precompiled")),
        ..EngineSettings::default()
    })
    .unwrap();
    let started = Instant::now();
    engine.load_bytes("trap.wasm", &bytes).unwrap();
    eprintln!("load from the on-disk cache: {:?}", started.elapsed());
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| {
                    if e.path().is_dir() {
                        walk(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn a_tiny_memory_cap_fails_instantiation_as_out_of_memory() {
    let guest = load(artifacts::PRESENCE_HEALTH);
    let c = ctx_with(Arc::default(), &[], limits(1_000, 0));
    let error = guest.check_health(&c, &[]).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::OutOfMemory, "{error}");
    assert_names(&error, "presence_health.wasm", Hook::Health);
}
