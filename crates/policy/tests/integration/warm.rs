//! Calls that name a device-set generation may run in warm instances, and
//! `choose_by_index` sends the device table once per generation: answers
//! stay what a fresh instance answers, a new generation gets the new
//! table, and a guest that traps, loops or runs out of memory fails every
//! call the same way (a broken instance is never served again).

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{
    CallContext, CallErrorKind, ContainerResponse, DeviceRef, Guest, InstanceStats,
    PreferredAnswer, PreferredRequest,
};

/// `n` devices on two NUMA nodes, four to a link group.
fn devices(n: usize, prefix: &str) -> Vec<DeviceRef> {
    (0..n)
        .map(|i| {
            let group = format!("link-{}", i / 4);
            device_ref(
                &format!("{prefix}{i:03}"),
                (i % 2) as i64,
                &[("link.group", group.as_str())],
            )
        })
        .collect()
}

fn by_index(
    guest: &Guest,
    ctx: &CallContext,
    table: &[DeviceRef],
    available: &[u32],
    must: &[u32],
    size: u32,
) -> Vec<String> {
    let table: Vec<&DeviceRef> = table.iter().collect();
    let answer = guest
        .choose_by_index(ctx, &table, available, must, size)
        .unwrap_or_else(|e| panic!("{e}"));
    answer.into_ids(&table).unwrap()
}

fn fresh(
    guest: &Guest,
    table: &[DeviceRef],
    available: &[u32],
    must: &[u32],
    size: u32,
) -> Vec<String> {
    let request = PreferredRequest {
        available: available
            .iter()
            .map(|&i| table[i as usize].clone())
            .collect(),
        must_include: must.iter().map(|&i| table[i as usize].id.clone()).collect(),
        size,
    };
    guest
        .choose(&ctx(&[]), &request)
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn warm_calls_answer_like_fresh_ones_and_a_new_generation_gets_its_table() {
    let packing = load(artifacts::NUMA_PACKING);
    assert!(packing.chooses_by_index());
    let first = devices(32, "gpu");
    let second = devices(24, "acc");
    let mut warm = ctx(&[]);
    for round in 0..20u32 {
        let available: Vec<u32> = (0..32).filter(|i| (i + round) % 3 != 0).collect();
        let must = [available[available.len() / 2]];
        let size = 1 + round % 6;
        warm.generation = Some(1);
        let got = by_index(&packing, &warm, &first, &available, &must, size);
        assert_eq!(got, fresh(&packing, &first, &available, &must, size));
        // Alternate generations: each call must see its own table.
        warm.generation = Some(2);
        let available: Vec<u32> = (0..24).collect();
        let got = by_index(&packing, &warm, &second, &available, &[], size);
        assert!(got.iter().all(|id| id.starts_with("acc")), "{got:?}");
        assert_eq!(got, fresh(&packing, &second, &available, &[], size));
    }
}

#[test]
fn a_plain_guest_gets_the_request_from_the_table() {
    // Built against 0.1 before the indexed form: answers IDs.
    let plain = load(artifacts::HOSTILE_STDERR_WRITER);
    assert!(!plain.chooses_by_index());
    let table = devices(4, "gpu");
    let mut warm = ctx(&[]);
    warm.generation = Some(5);
    let refs: Vec<&DeviceRef> = table.iter().collect();
    for _ in 0..3 {
        let answer = plain
            .choose_by_index(&warm, &refs, &[1, 2], &[], 1)
            .unwrap();
        assert!(matches!(answer, PreferredAnswer::Ids(_)), "{answer:?}");
    }
}

#[test]
fn broken_instances_are_never_served_again() {
    let table = devices(4, "gpu");
    let refs: Vec<&DeviceRef> = table.iter().collect();
    for (guest, kind, limits) in [
        (
            artifacts::HOSTILE_TRAP,
            CallErrorKind::Trap,
            wdp_policy::CallLimits::default(),
        ),
        (
            artifacts::HOSTILE_INFINITE_LOOP,
            CallErrorKind::Timeout,
            limits(50, 64),
        ),
        (
            artifacts::HOSTILE_MEMORY_BOMB,
            CallErrorKind::OutOfMemory,
            limits(1000, 16),
        ),
    ] {
        let guest = load(guest);
        let mut warm = ctx_with(Default::default(), &[], limits);
        warm.generation = Some(9);
        for _ in 0..3 {
            let error = guest
                .choose_by_index(&warm, &refs, &[0, 1, 2, 3], &[], 2)
                .unwrap_err();
            assert_eq!(error.kind(), kind, "{error}");
        }
        // Its polite path still works afterwards, warm or not.
        let answer = guest.choose_by_index(&warm, &refs, &[], &[], 0);
        assert!(answer.is_ok(), "{answer:?}");
    }
}

fn stats(instantiated: u64, reused: u64, retired: u64) -> InstanceStats {
    InstanceStats {
        instantiated,
        reused,
        retired,
    }
}

#[test]
fn kubelet_hooks_run_warm_and_the_counters_say_so() {
    let table = devices(8, "gpu");
    let refs: Vec<&DeviceRef> = table.iter().collect();
    let all: Vec<u32> = (0..8).collect();
    let mut warm = ctx(&[]);
    warm.generation = Some(41);

    // preferred-allocation, by index and whole: one instance for the
    // generation, then warm calls.
    let packing = load(artifacts::NUMA_PACKING);
    assert_eq!(packing.instance_stats(), stats(0, 0, 0));
    for _ in 0..5 {
        packing
            .choose_by_index(&warm, &refs, &all, &[], 2)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(packing.instance_stats(), stats(1, 4, 0));
    let request = PreferredRequest {
        available: table.clone(),
        must_include: Vec::new(),
        size: 2,
    };
    packing.choose(&warm, &request).unwrap();
    assert_eq!(packing.instance_stats(), stats(1, 5, 0));
    // Without a generation every call instantiates afresh.
    for _ in 0..3 {
        packing.choose(&ctx(&[]), &request).unwrap();
    }
    assert_eq!(packing.instance_stats(), stats(4, 5, 0));
    // A new generation gets an instance of its own.
    warm.generation = Some(42);
    packing.choose_by_index(&warm, &refs, &all, &[], 2).unwrap();
    assert_eq!(packing.instance_stats(), stats(5, 5, 0));

    // allocate and pre-start run warm as well.
    let shaper = load(artifacts::ALLOCATE_SHAPER);
    for _ in 0..3 {
        shaper
            .allocate(&warm, &table[..1], &ContainerResponse::default())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(shaper.instance_stats(), stats(1, 2, 0));
    let check = load(artifacts::PRE_START_CHECK);
    for _ in 0..3 {
        // A refusal (the guest's own `Err`) keeps the instance too.
        let _ = check.pre_start(&warm, &table[..1]);
    }
    assert_eq!(check.instance_stats(), stats(1, 2, 0));
}

#[test]
fn a_trapping_instance_is_retired_and_counted() {
    let table = devices(4, "gpu");
    let refs: Vec<&DeviceRef> = table.iter().collect();
    let trap = load(artifacts::HOSTILE_TRAP);
    let mut warm = ctx(&[]);
    warm.generation = Some(7);
    for _ in 0..3 {
        let error = trap
            .choose_by_index(&warm, &refs, &[0, 1, 2, 3], &[], 2)
            .unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::Trap, "{error}");
    }
    assert_eq!(trap.instance_stats(), stats(3, 0, 3));
}
