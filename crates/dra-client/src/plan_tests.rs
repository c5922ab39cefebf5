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

// ---- counter sets and partitions, by served version ----

use crate::device::{Capacity, CapacityPolicy, CapacityRange};
use crate::pool::{CounterSet, PoolContent};
use crate::version::ServerVersion;

/// A GPU `gpu<g>` with 4 memory slices as a counter set, the whole device
/// and 4 quarter partitions consuming from it.
fn partitioned_gpu(g: usize) -> (CounterSet, Vec<DraDevice>) {
    let set = CounterSet::new(
        format!("gpu{g}-counters"),
        [("memory", "40Gi"), ("slices", "4")],
    );
    let whole = DraDevice::new(format!("gpu{g}"))
        .consuming(set.name.clone(), [("memory", "40Gi"), ("slices", "4")]);
    let mut devices = vec![whole];
    for p in 0..4 {
        devices.push(
            DraDevice::new(format!("gpu{g}-part{p}"))
                .consuming(set.name.clone(), [("memory", "10Gi"), ("slices", "1")])
                .partition_of(format!("gpu{g}")),
        );
    }
    (set, devices)
}

fn partitioned_pool(gpus: usize, plain: usize) -> PoolContent {
    let mut content = PoolContent::default();
    for g in 0..gpus {
        let (set, devices) = partitioned_gpu(g);
        content.counter_sets.push(set);
        content.devices.extend(devices);
    }
    content
        .devices
        .extend((0..plain).map(|i| DraDevice::new(format!("nic{i:03}"))));
    content
}

fn set_names(spec: &ResourceSliceSpec) -> Vec<&str> {
    spec.shared_counters
        .iter()
        .flatten()
        .map(|s| s.name.as_str())
        .collect()
}

fn names_in(spec: &ResourceSliceSpec) -> Vec<&str> {
    spec.devices
        .iter()
        .flatten()
        .map(|d| d.name.as_str())
        .collect()
}

#[test]
fn whole_devices_plan_the_same_slices_on_every_version() {
    let mut list = devices(200);
    list[3] = tainted(list[3].clone());
    let content = PoolContent::from_devices(list.clone());
    let old = plan_slices(&target(), &list, 4);
    assert_eq!(plan_pool(&target(), &content, ServerVersion::V1_34, 4), old);
    assert_eq!(plan_pool(&target(), &content, ServerVersion::V1_35, 4), old);
    assert_eq!(
        plan_pool(&target(), &PoolContent::default(), ServerVersion::V1_35, 4),
        plan_slices(&target(), &[], 4)
    );
}

#[test]
fn on_1_35_counter_sets_get_slices_of_their_own() {
    let content = partitioned_pool(10, 3);
    let plan = plan_pool(&target(), &content, ServerVersion::V1_35, 6);
    // 10 sets: 8 in one slice, 2 in another; 53 devices, 50 of them
    // consuming counters: at most 64 per slice, so one device slice.
    assert_eq!(plan.len(), 3, "{plan:#?}");
    for spec in &plan {
        assert_eq!(spec.pool.generation, 6);
        assert_eq!(spec.pool.resource_slice_count, 3);
        assert!(
            spec.shared_counters.is_none() || spec.devices.is_none(),
            "devices and sharedCounters never share a slice: {spec:#?}"
        );
    }
    assert_eq!(set_names(&plan[0]).len(), 8);
    assert_eq!(set_names(&plan[1]), vec!["gpu8-counters", "gpu9-counters"]);
    assert_eq!(names_in(&plan[2]).len(), 53);
    let consumer = plan[2]
        .devices
        .iter()
        .flatten()
        .find(|d| d.name == "gpu0-part1")
        .unwrap();
    let consumption = &consumer.consumes_counters.as_ref().unwrap()[0];
    assert_eq!(consumption.counter_set, "gpu0-counters");
    assert_eq!(consumption.counters["memory"].value.0, "10Gi");
}

#[test]
fn on_1_35_a_slice_with_consuming_devices_holds_at_most_64() {
    let content = partitioned_pool(20, 30);
    let plan = plan_pool(&target(), &content, ServerVersion::V1_35, 1);
    let device_slices: Vec<&ResourceSliceSpec> =
        plan.iter().filter(|s| s.devices.is_some()).collect();
    let total: usize = device_slices.iter().map(|s| names_in(s).len()).sum();
    assert_eq!(total, 130);
    for spec in device_slices {
        let consumes = spec
            .devices
            .iter()
            .flatten()
            .any(|d| d.consumes_counters.is_some());
        let limit = if consumes { 64 } else { 128 };
        assert!(names_in(spec).len() <= limit, "{}", names_in(spec).len());
    }
}

#[test]
fn on_1_34_counter_sets_travel_with_their_consumers() {
    let content = partitioned_pool(3, 2);
    let plan = plan_pool(&target(), &content, ServerVersion::V1_34, 2);
    // 3 groups of 2 counters and 5 devices each fit one slice, with the
    // two devices consuming nothing.
    assert_eq!(plan.len(), 1, "{plan:#?}");
    assert_eq!(
        set_names(&plan[0]),
        vec!["gpu0-counters", "gpu1-counters", "gpu2-counters"]
    );
    assert_eq!(names_in(&plan[0]).len(), 17);

    // 17 sets of 2 counters are 34: the 17th group goes to a second slice,
    // with its consumers.
    let content = partitioned_pool(17, 0);
    let plan = plan_pool(&target(), &content, ServerVersion::V1_34, 2);
    assert_eq!(plan.len(), 2);
    for spec in &plan {
        let shared: usize = spec
            .shared_counters
            .iter()
            .flatten()
            .map(|s| s.counters.len())
            .sum();
        assert!(shared <= 32, "{shared}");
        let sets = set_names(spec);
        for device in spec.devices.iter().flatten() {
            for consumption in device.consumes_counters.iter().flatten() {
                assert!(
                    sets.contains(&consumption.counter_set.as_str()),
                    "{} consumes {} from another slice",
                    device.name,
                    consumption.counter_set
                );
            }
        }
    }
    assert_eq!(set_names(&plan[1]), vec!["gpu9-counters"]);
    assert_eq!(
        names_in(&plan[1]),
        vec![
            "gpu9",
            "gpu9-part0",
            "gpu9-part1",
            "gpu9-part2",
            "gpu9-part3"
        ]
    );
}

#[test]
fn on_1_34_a_slice_holds_at_most_1024_consumed_counters() {
    // 64 devices consuming all 16 counters of one set: 1024 consumed
    // counters, a full slice. Another group, 1 device consuming 1 counter,
    // would fit every other limit (17 shared counters, 65 devices) but not
    // this one, so it gets a slice of its own.
    let counters: Vec<(String, String)> =
        (0..16).map(|i| (format!("c{i}"), "1".to_owned())).collect();
    let mut content = PoolContent {
        devices: Vec::new(),
        counter_sets: vec![
            CounterSet::new("big", counters.clone()),
            CounterSet::new("small", [("c0", "1")]),
        ],
    };
    for d in 0..64 {
        content
            .devices
            .push(DraDevice::new(format!("d{d:02}")).consuming("big", counters.clone()));
    }
    content
        .devices
        .push(DraDevice::new("s0").consuming("small", [("c0", "1")]));
    let plan = plan_pool(&target(), &content, ServerVersion::V1_34, 1);
    assert_eq!(plan.len(), 2);
    assert_eq!(names_in(&plan[0]).len(), 64);
    assert_eq!(set_names(&plan[0]), vec!["big"]);
    assert_eq!(names_in(&plan[1]), vec!["s0"]);
    assert_eq!(set_names(&plan[1]), vec!["small"]);

    // Without the 1024 rule (1.35 and later) nothing of this applies.
    let plan = plan_pool(&target(), &content, ServerVersion::V1_35, 1);
    assert!(plan.iter().all(|s| names_in(s).len() <= 64));
}

#[test]
fn partitioned_pools_plan_identically_whatever_the_order() {
    for version in [ServerVersion::V1_34, ServerVersion::V1_35] {
        let content = partitioned_pool(12, 40);
        let first = plan_pool(&target(), &content, version, 3);
        let mut shuffled = content.clone();
        shuffled.devices.reverse();
        shuffled.counter_sets.reverse();
        shuffled.devices.swap(3, 40);
        assert_eq!(
            plan_pool(&target(), &shuffled, version, 3),
            first,
            "{version}"
        );
    }
}

#[test]
fn capacities_and_sharing_take_the_api_form() {
    let device = DraDevice::new("nic0")
        .shared()
        .with_capacity(
            "bandwidth",
            Capacity::new("100G").with_policy(CapacityPolicy {
                default: Some("1G".into()),
                valid_values: Vec::new(),
                valid_range: Some(CapacityRange {
                    min: "1G".into(),
                    max: Some("100G".into()),
                    step: Some("1G".into()),
                }),
            }),
        )
        .with_capacity("example.com/queues", Capacity::new("8"));
    let plan = plan_slices(&target(), &[device, DraDevice::new("nic1")], 1);
    let written = &plan[0].devices.as_ref().unwrap()[0];
    assert_eq!(written.allow_multiple_allocations, Some(true));
    let capacity = written.capacity.as_ref().unwrap();
    let keys: Vec<&str> = capacity.keys().map(String::as_str).collect();
    // Named as written: the scheduler matches requests by the exact key.
    assert_eq!(keys, vec!["bandwidth", "example.com/queues"]);
    let policy = capacity["bandwidth"].request_policy.as_ref().unwrap();
    assert_eq!(policy.default.as_ref().unwrap().0, "1G");
    assert_eq!(policy.valid_values, None);
    let range = policy.valid_range.as_ref().unwrap();
    assert_eq!(
        (range.min.0.as_str(), range.max.as_ref().unwrap().0.as_str()),
        ("1G", "100G")
    );
    let plain = &plan[0].devices.as_ref().unwrap()[1];
    assert_eq!(plain.allow_multiple_allocations, None);
    assert_eq!(plain.capacity, None);
    assert_eq!(plain.consumes_counters, None);
}
