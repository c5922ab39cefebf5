//! Unit tests of slice planning: chunking, ordering, the API form of devices.

use super::*;
use crate::device::{DeviceTaint, TaintEffect};

fn target() -> PoolTarget {
    PoolTarget::new("gpu.example.com", "node-1")
}

fn devices(count: usize) -> Vec<DraDevice> {
    (0..count)
        .map(|i| DraDevice::new(format!("dev{i:04}")))
        .collect()
}

fn tainted(mut device: DraDevice) -> DraDevice {
    device.taints.push(DeviceTaint {
        key: "gpu.example.com/unhealthy".into(),
        value: "xid-79".into(),
        effect: TaintEffect::NoSchedule,
    });
    device
}

fn device_counts(plan: &[ResourceSliceSpec]) -> Vec<usize> {
    plan.iter()
        .map(|s| s.devices.as_ref().map_or(0, Vec::len))
        .collect()
}

#[test]
fn up_to_128_devices_fit_one_slice_and_129_need_two() {
    assert_eq!(
        device_counts(&plan_slices(&target(), &devices(128), 1)),
        vec![128]
    );
    let plan = plan_slices(&target(), &devices(129), 7);
    assert_eq!(device_counts(&plan), vec![128, 1]);
    for spec in &plan {
        assert_eq!(spec.pool.generation, 7);
        assert_eq!(spec.pool.resource_slice_count, 2);
        assert_eq!(spec.pool.name, "node-1");
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(spec.driver, "gpu.example.com");
    }
}

#[test]
fn a_tainted_device_limits_its_slice_to_64() {
    let mut list = devices(65);
    list[10] = tainted(list[10].clone());
    assert_eq!(
        device_counts(&plan_slices(&target(), &list, 1)),
        vec![64, 1]
    );

    let mut list = devices(65);
    list[64] = tainted(list[64].clone());
    assert_eq!(
        device_counts(&plan_slices(&target(), &list, 1)),
        vec![64, 1]
    );

    let mut list = devices(200);
    list[199] = tainted(list[199].clone());
    let plan = plan_slices(&target(), &list, 1);
    // The second slice holds the 71 untainted devices left; adding the tainted
    // one would exceed 64, so it starts a third.
    assert_eq!(device_counts(&plan), vec![128, 71, 1]);
    for spec in &plan {
        let count = spec.devices.as_ref().map_or(0, Vec::len);
        let any_tainted = spec.devices.iter().flatten().any(|d| d.taints.is_some());
        assert!(count <= if any_tainted { 64 } else { 128 });
    }
}

#[test]
fn identical_input_plans_identical_slices_whatever_the_order() {
    let mut list = devices(300);
    list[5] = tainted(list[5].clone());
    let first = plan_slices(&target(), &list, 3);
    list.reverse();
    let second = plan_slices(&target(), &list, 3);
    assert_eq!(first, second);
    let names: Vec<&str> = first
        .iter()
        .flat_map(|s| s.devices.iter().flatten())
        .map(|d| d.name.as_str())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
}

#[test]
fn no_devices_plan_one_empty_slice() {
    let plan = plan_slices(&target(), &[], 2);
    assert_eq!(device_counts(&plan), vec![0]);
    assert_eq!(plan[0].pool.resource_slice_count, 1);
}

#[test]
fn devices_take_the_api_form() {
    let device = tainted(
        DraDevice::new("gpu0")
            .with_attribute("model", AttributeValue::String("A100".into()))
            .with_attribute("resource.kubernetes.io/numaNode", AttributeValue::Int(1))
            .with_attribute("ok", AttributeValue::Bool(true))
            .with_attribute("fw", AttributeValue::Version("1.0.0".into())),
    );
    let plan = plan_slices(&target(), &[device], 1);
    let written = &plan[0].devices.as_ref().unwrap()[0];
    let attributes = written.attributes.as_ref().unwrap();
    let keys: Vec<&str> = attributes.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        vec![
            "gpu.example.com/fw",
            "gpu.example.com/model",
            "gpu.example.com/ok",
            "resource.kubernetes.io/numaNode"
        ]
    );
    assert_eq!(
        attributes["gpu.example.com/model"].string.as_deref(),
        Some("A100")
    );
    assert_eq!(attributes["resource.kubernetes.io/numaNode"].int, Some(1));
    assert_eq!(attributes["gpu.example.com/ok"].bool, Some(true));
    assert_eq!(
        attributes["gpu.example.com/fw"].version.as_deref(),
        Some("1.0.0")
    );
    let taint = &written.taints.as_ref().unwrap()[0];
    assert_eq!(taint.effect, "NoSchedule");
    assert_eq!(taint.value.as_deref(), Some("xid-79"));
    assert_eq!(taint.time_added, None);
}
