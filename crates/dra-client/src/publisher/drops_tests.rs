//! Unit tests of dropped-field detection and publishing without them.

use super::*;
use crate::device::{Capacity, CapacityPolicy, DraDevice};
use crate::plan::{PoolTarget, plan_pool};
use crate::pool::CounterSet;
use crate::version::ServerVersion;

fn pool() -> PoolContent {
    PoolContent {
        counter_sets: vec![CounterSet::new("gpu0-counters", [("memory", "40Gi")])],
        devices: vec![
            DraDevice::new("gpu0").consuming("gpu0-counters", [("memory", "40Gi")]),
            DraDevice::new("gpu0-part0")
                .consuming("gpu0-counters", [("memory", "10Gi")])
                .partition_of("gpu0"),
            DraDevice::new("nic0").shared().with_capacity(
                "bandwidth",
                Capacity::new("10G").with_policy(CapacityPolicy {
                    default: Some("1G".into()),
                    ..CapacityPolicy::default()
                }),
            ),
        ],
    }
}

fn planned(content: &PoolContent) -> Vec<ResourceSliceSpec> {
    plan_pool(
        &PoolTarget::new("gpu.example.com", "node-1"),
        content,
        ServerVersion::V1_34,
        1,
    )
}

#[test]
fn dropped_counters_and_sharing_are_seen_in_the_answer() {
    let sent = planned(&pool()).remove(0);
    assert!(has_counters(&sent) && has_sharing(&sent));
    let none = Dropped::default();
    assert_eq!(none.dropped_by(&sent, &sent), none);

    let mut without_counters = sent.clone();
    without_counters.shared_counters = None;
    for device in without_counters.devices.iter_mut().flatten() {
        device.consumes_counters = None;
    }
    let seen = none.dropped_by(&sent, &without_counters);
    assert!(seen.partitions && !seen.sharing);

    let mut without_sharing = sent.clone();
    for device in without_sharing.devices.iter_mut().flatten() {
        device.allow_multiple_allocations = None;
        for capacity in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
            capacity.request_policy = None;
        }
    }
    let seen = none.dropped_by(&sent, &without_sharing);
    assert!(seen.sharing && !seen.partitions);
    // Once seen, a later answer that keeps the fields does not unsee it.
    assert_eq!(seen.dropped_by(&sent, &sent), seen);
}

#[test]
fn nothing_sent_is_nothing_dropped() {
    let plain = planned(&PoolContent::from_devices(vec![DraDevice::new("gpu0")])).remove(0);
    let mut stored = plain.clone();
    stored.devices = None;
    assert_eq!(
        Dropped::default().dropped_by(&plain, &stored),
        Dropped::default()
    );
}

#[test]
fn without_partitions_only_whole_devices_remain_and_consume_nothing() {
    let content = without_dropped(
        &pool(),
        Dropped {
            partitions: true,
            sharing: false,
        },
    );
    assert!(content.counter_sets.is_empty());
    let names: Vec<&str> = content.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, vec!["gpu0", "nic0"]);
    assert!(
        content
            .devices
            .iter()
            .all(|d| d.consumes_counters.is_empty())
    );
    assert!(content.devices[1].allow_multiple_allocations);
    assert!(planned(&content).iter().all(|spec| !has_counters(spec)));
}

#[test]
fn without_sharing_devices_keep_their_capacity_but_not_its_policy() {
    let content = without_dropped(
        &pool(),
        Dropped {
            partitions: false,
            sharing: true,
        },
    );
    assert_eq!(content.devices.len(), 3);
    let nic = &content.devices[2];
    assert!(!nic.allow_multiple_allocations);
    assert_eq!(nic.capacity["bandwidth"], Capacity::new("10G"));
    assert!(planned(&content).iter().all(|spec| !has_sharing(spec)));
    assert_eq!(without_dropped(&pool(), Dropped::default()), pool());
}
