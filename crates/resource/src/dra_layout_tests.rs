use super::*;
use wdp_policy::types::{
    Counter, DeviceTaintV2 as DeviceTaint, TaintEffectV2, TaintedV2 as Tainted,
};

fn device(id: &str) -> Device {
    Device {
        id: id.to_owned(),
        candidates: vec![id.to_owned()],
        ..Device::default()
    }
}

fn counter(name: &str, value: &str) -> Counter {
    Counter {
        name: name.to_owned(),
        value: value.to_owned(),
    }
}

/// A GPU with 7 slices and 80Gi split into a whole device and two
/// partitions.
fn gpu_layout() -> Layout {
    let consume = |slices: &str, memory: &str| CounterConsumption {
        counter_set: "gpu-0".into(),
        counters: vec![counter("slices", slices), counter("memory", memory)],
    };
    Layout {
        counter_sets: vec![CounterSet {
            name: "gpu-0".into(),
            counters: vec![counter("slices", "7"), counter("memory", "80Gi")],
        }],
        devices: vec![DeviceLayout {
            id: "gpu0".into(),
            consumes_counters: vec![consume("7", "80Gi")],
            ..DeviceLayout::default()
        }],
        partitions: vec![
            Partition {
                id: "gpu-0-1g-0".into(),
                parent: "gpu0".into(),
                attributes: vec![("profile".into(), "1g.10gb".into())],
                consumes_counters: vec![consume("1", "10Gi")],
                capacity: Vec::new(),
            },
            Partition {
                id: "gpu-0-3g-0".into(),
                parent: "gpu0".into(),
                attributes: Vec::new(),
                consumes_counters: vec![consume("3", "40Gi")],
                capacity: Vec::new(),
            },
        ],
    }
}

#[test]
fn a_partitioned_gpu_is_accepted_and_indexed() {
    let layout = gpu_layout();
    assert_eq!(check_layout(&layout, &[device("gpu0")]), Ok(()));
    let extras = DraExtras::from_layout(layout);
    assert_eq!(extras.partition("gpu-0-1g-0").unwrap().parent, "gpu0");
    assert!(!extras.has_no_layout());
    assert!(!extras.allows_multiple_allocations("gpu0"));
}

#[test]
fn nonsense_layouts_are_refused_with_the_reason() {
    let devices = [device("gpu0")];
    let mut cases: Vec<(Layout, &str)> = Vec::new();
    let mut l = gpu_layout();
    l.partitions[0].consumes_counters[0].counter_set = "gpu-9".into();
    cases.push((l, "which the layout does not have"));
    let mut l = gpu_layout();
    l.partitions[0].consumes_counters[0].counters[0].name = "cores".into();
    cases.push((l, "which counter set \"gpu-0\" does not have"));
    let mut l = gpu_layout();
    l.partitions[0].consumes_counters[0].counters[0].value = "-1".into();
    cases.push((l, "is negative"));
    let mut l = gpu_layout();
    l.counter_sets[0].counters[1].value = "99999999999999999999999Ei".into();
    cases.push((l, "is too large"));
    let mut l = gpu_layout();
    l.partitions[0].consumes_counters[0].counters[1].value = "81Gi".into();
    cases.push((l, "more than the"));
    let mut l = gpu_layout();
    l.partitions[1].id = "gpu-0-1g-0".into();
    cases.push((l, "named twice"));
    let mut l = gpu_layout();
    l.partitions[0].parent = "gpu7".into();
    cases.push((l, "not a device discovery answered"));
    let mut l = gpu_layout();
    l.partitions[0].id = "GPU_0".into();
    cases.push((l, "DNS label"));
    let mut l = gpu_layout();
    l.partitions[0].id = "gpu0".into();
    cases.push((l, "has the ID of a device"));
    let mut l = gpu_layout();
    l.partitions = (0..=MAX_PARTITIONS)
        .map(|i| Partition {
            id: format!("p-{i}"),
            parent: "gpu0".into(),
            ..Partition::default()
        })
        .collect();
    cases.push((l, "1025 partitions, more than the 1024"));
    let mut l = gpu_layout();
    l.devices[0].capacity = vec![Capacity {
        name: "memory".into(),
        value: "80Gi".into(),
        request_policy: Some(wdp_policy::types::RequestPolicy {
            default: Some("1Gi".into()),
            ..Default::default()
        }),
    }];
    cases.push((l, "only a device that allows multiple allocations"));
    for (layout, expected) in cases {
        let error = check_layout(&layout, &devices).unwrap_err();
        assert!(error.contains(expected), "{error:?} lacks {expected:?}");
    }
}

#[test]
fn a_shared_device_may_set_a_request_policy_within_its_capacity() {
    let devices = [device("gpu0")];
    let policy = |default: &str, values: &[&str]| wdp_policy::types::RequestPolicy {
        default: Some(default.into()),
        valid_values: values.iter().map(|v| (*v).to_owned()).collect(),
        valid_range: None,
    };
    let layout = |policy| Layout {
        devices: vec![DeviceLayout {
            id: "gpu0".into(),
            allow_multiple_allocations: true,
            capacity: vec![Capacity {
                name: "memory".into(),
                value: "80Gi".into(),
                request_policy: Some(policy),
            }],
            ..DeviceLayout::default()
        }],
        ..Layout::default()
    };
    assert_eq!(
        check_layout(&layout(policy("10Gi", &["10Gi", "20Gi"])), &devices),
        Ok(())
    );
    let error = check_layout(&layout(policy("10Gi", &["20Gi", "10Gi"])), &devices).unwrap_err();
    assert!(error.contains("ascending"), "{error}");
    let error = check_layout(&layout(policy("5Gi", &["10Gi"])), &devices).unwrap_err();
    assert!(error.contains("default must be one of"), "{error}");
}

#[test]
fn taints_are_checked_as_the_api_checks_them() {
    let devices = [device("gpu0")];
    let taint = |key: &str, value: &str| DeviceTaint {
        key: key.into(),
        value: value.into(),
        effect: TaintEffectV2::NoSchedule,
    };
    let ok = Tainted {
        id: "gpu0".into(),
        taints: vec![taint("example.com/ecc", "uncorrectable-errors")],
    };
    for hook in [Hook::DeviceTaints, Hook::DeviceTaintsV2] {
        assert_eq!(
            check_taints(std::slice::from_ref(&ok), &devices, hook),
            Ok(())
        );
    }
    let mut cases = Vec::new();
    let mut t = ok.clone();
    t.id = "gpu9".into();
    cases.push((t, Hook::DeviceTaints, "not a device of the input"));
    let mut t = ok.clone();
    t.taints = (0..4).map(|i| taint(&format!("k{i}"), "")).collect();
    cases.push((t, Hook::DeviceTaints, "more than the 3"));
    let mut t = ok.clone();
    t.taints = (0..16).map(|i| taint(&format!("k{i}"), "")).collect();
    cases.push((t, Hook::DeviceTaintsV2, "more than the 15"));
    let mut t = ok.clone();
    t.taints[0].key = "Example.com/ecc".into();
    cases.push((t, Hook::DeviceTaintsV2, "not a DNS subdomain"));
    let mut t = ok.clone();
    t.taints[0].value = "two words".into();
    cases.push((t, Hook::DeviceTaints, "not a label value"));
    for (tainted, hook, expected) in cases {
        let error = check_taints(&[tainted], &devices, hook).unwrap_err();
        assert!(error.contains(expected), "{error:?} lacks {expected:?}");
    }
    // Through device-taints-v2: 15 taints, `none` among them, fit.
    let mut full = ok.clone();
    full.taints = (0..15).map(|i| taint(&format!("k{i}"), "")).collect();
    full.taints[0].effect = TaintEffectV2::None;
    assert_eq!(
        check_taints(&[full], &devices, Hook::DeviceTaintsV2),
        Ok(())
    );
}
