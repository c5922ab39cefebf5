//! Unit tests of the pure parts of a reconcile pass.

use super::*;
use crate::device::{DeviceTaint, DraDevice, TaintEffect};
use crate::plan::plan_slices;
use k8s_openapi::jiff::Timestamp;

fn target() -> PoolTarget {
    PoolTarget::new("gpu.example.com", "node-1")
}

fn tainted_device(name: &str) -> DraDevice {
    DraDevice::new(name).with_taint(DeviceTaint {
        key: "gpu.example.com/unhealthy".into(),
        value: String::new(),
        effect: TaintEffect::NoExecute,
    })
}

fn as_server_slice(name: &str, spec: ResourceSliceSpec) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version: Some("17".into()),
            ..ObjectMeta::default()
        },
        spec,
    }
}

#[test]
fn the_selector_names_node_and_driver() {
    assert_eq!(
        field_selector(&target()),
        "spec.nodeName=node-1,spec.driver=gpu.example.com"
    );
}

#[test]
fn generated_names_stay_valid_and_short() {
    assert_eq!(generate_name_prefix(&target()), "node-1-gpu.example.com-");
    // Cut after a '.': the dot goes, so the server's suffix follows a '-'.
    let long = PoolTarget::new("a.b", "n".repeat(56) + ".x");
    let prefix = generate_name_prefix(&long);
    assert_eq!(prefix, format!("{}-", "n".repeat(56)));
    assert!(prefix.len() + 5 <= 63);
}

#[test]
fn server_additions_do_not_count_as_changes() {
    let devices = [tainted_device("gpu0"), DraDevice::new("gpu1")];
    let planned = plan_slices(&target(), &devices, 4);
    let mut on_server = planned[0].clone();
    for device in on_server.devices.iter_mut().flatten() {
        for taint in device.taints.iter_mut().flatten() {
            taint.time_added = Some(Time(Timestamp::from_second(1_700_000_000).unwrap()));
        }
        if device.attributes.is_none() {
            device.attributes = Some(Default::default());
        }
    }
    assert!(same_content(&planned, [&on_server].into_iter()));

    let other_generation = plan_slices(&target(), &devices, 5);
    assert!(!same_content(&other_generation, [&on_server].into_iter()));
    let fewer = plan_slices(&target(), &devices[1..], 4);
    assert!(!same_content(&fewer, [&on_server].into_iter()));
}

#[test]
fn taint_times_are_kept_for_taints_that_stay() {
    let time = Time(Timestamp::from_second(1_700_000_000).unwrap());
    let mut old = plan_slices(
        &target(),
        &[tainted_device("gpu0"), tainted_device("gpu1")],
        1,
    );
    for device in old[0].devices.iter_mut().flatten() {
        device.taints.as_mut().unwrap()[0].time_added = Some(time.clone());
    }
    let existing = [as_server_slice("s1", old.remove(0))];

    let mut changed_gpu1 = tainted_device("gpu1");
    changed_gpu1.taints[0].effect = TaintEffect::NoSchedule;
    let mut planned = plan_slices(&target(), &[tainted_device("gpu0"), changed_gpu1], 2);
    keep_taint_times(&mut planned, &existing);
    let devices = planned[0].devices.as_ref().unwrap();
    assert_eq!(
        devices[0].taints.as_ref().unwrap()[0].time_added,
        Some(time)
    );
    assert_eq!(devices[1].taints.as_ref().unwrap()[0].time_added, None);
}

#[test]
fn only_slices_sharing_one_generation_count_as_a_pool() {
    let a = as_server_slice("a", plan_slices(&target(), &[], 3).remove(0));
    let b = as_server_slice("b", plan_slices(&target(), &[], 3).remove(0));
    let c = as_server_slice("c", plan_slices(&target(), &[], 4).remove(0));
    assert_eq!(single_generation(&[a.clone(), b]), Some(3));
    assert_eq!(single_generation(&[a, c]), None);
    assert_eq!(single_generation(&[]), None);
}

#[test]
fn quantities_compare_by_amount_not_spelling() {
    use crate::device::{Capacity, CapacityPolicy};
    use crate::plan::plan_pool;
    use crate::pool::{CounterSet, PoolContent};
    use crate::version::ServerVersion;

    let content = |memory: &str, default: &str| PoolContent {
        counter_sets: vec![CounterSet::new("gpu0", [("memory", memory)])],
        devices: vec![
            DraDevice::new("gpu0").consuming("gpu0", [("memory", memory)]),
            DraDevice::new("nic0").shared().with_capacity(
                "bandwidth",
                Capacity::new("10G").with_policy(CapacityPolicy {
                    default: Some(default.into()),
                    ..CapacityPolicy::default()
                }),
            ),
        ],
    };
    let planned = plan_pool(
        &target(),
        &content("1024Mi", "1000M"),
        ServerVersion::V1_34,
        1,
    );
    // The server answers in its canonical spelling.
    let on_server = plan_pool(&target(), &content("1Gi", "1G"), ServerVersion::V1_34, 1);
    assert!(same_content(&planned, on_server.iter()));
    let more = plan_pool(&target(), &content("2Gi", "1G"), ServerVersion::V1_34, 1);
    assert!(!same_content(&more, on_server.iter()));
}

#[test]
fn a_none_taint_keeps_its_time_while_it_holds() {
    let time = Time(Timestamp::from_second(1_700_000_000).unwrap());
    let informing = |effect| {
        DraDevice::new("gpu0").with_taint(DeviceTaint {
            key: "gpu.example.com/degraded".into(),
            value: "ecc".into(),
            effect,
        })
    };
    let mut old = plan_slices(&target(), &[informing(TaintEffect::None)], 1);
    let taint = &mut old[0].devices.as_mut().unwrap()[0].taints.as_mut().unwrap()[0];
    assert_eq!(taint.effect, "None");
    taint.time_added = Some(time.clone());
    let existing = [as_server_slice("s1", old.remove(0))];

    // The next pass (another generation: something else changed) keeps it.
    let mut planned = plan_slices(&target(), &[informing(TaintEffect::None)], 2);
    keep_taint_times(&mut planned, &existing);
    let kept = &planned[0].devices.as_ref().unwrap()[0]
        .taints
        .as_ref()
        .unwrap()[0];
    assert_eq!(kept.time_added, Some(time));
    // The same key turned NoSchedule is a new taint, with a new time.
    let mut planned = plan_slices(&target(), &[informing(TaintEffect::NoSchedule)], 2);
    keep_taint_times(&mut planned, &existing);
    let new = &planned[0].devices.as_ref().unwrap()[0]
        .taints
        .as_ref()
        .unwrap()[0];
    assert_eq!(new.time_added, None);
}
