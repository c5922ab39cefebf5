//! Unit tests of the API server's rules as `validate` checks them.

use super::*;
use crate::device::{DeviceTaint, TaintEffect};

const DRIVER: &str = "gpu.example.com";

fn fields_of(problems: &[DeviceProblem]) -> Vec<(Option<&str>, &str)> {
    problems
        .iter()
        .map(|p| (p.device.as_deref(), p.field.as_str()))
        .collect()
}

#[test]
fn a_good_device_list_has_no_problems() {
    let device = DraDevice::new("gpu0")
        .with_attribute("model", AttributeValue::String("A100".into()))
        .with_attribute("resource.kubernetes.io/numaNode", AttributeValue::Int(1))
        .with_attribute(
            "driverVersion",
            AttributeValue::Version("1.2.3-rc.1+build.5".into()),
        )
        .with_attribute("healthy", AttributeValue::Bool(true))
        .with_taint(DeviceTaint {
            key: "gpu.example.com/unhealthy".into(),
            value: "".into(),
            effect: TaintEffect::NoSchedule,
        });
    assert_eq!(validate(DRIVER, &[device, DraDevice::new("gpu1")]), vec![]);
}

#[test]
fn driver_and_device_names_are_checked() {
    let problems = validate(
        "Bad_Driver",
        &[
            DraDevice::new("GPU0"),
            DraDevice::new("gpu1"),
            DraDevice::new("gpu1"),
        ],
    );
    assert_eq!(
        fields_of(&problems),
        vec![
            (None, "driver"),
            (Some("GPU0"), "name"),
            (Some("gpu1"), "name")
        ]
    );
    assert!(
        problems[1].to_string().contains("not a DNS label"),
        "{}",
        problems[1]
    );
    assert!(problems[2].message.contains("same name"));
}

#[test]
fn attribute_count_keys_and_values_are_checked() {
    let mut crowded = DraDevice::new("crowded");
    for index in 0..33 {
        crowded = crowded.with_attribute(format!("a{index}"), AttributeValue::Int(index));
    }
    let problems = validate(DRIVER, &[crowded]);
    assert_eq!(fields_of(&problems), vec![(Some("crowded"), "attributes")]);
    assert!(problems[0].message.contains("33 attributes"));

    let device = DraDevice::new("gpu0")
        .with_attribute("1st", AttributeValue::Int(1))
        .with_attribute("a-b", AttributeValue::Int(1))
        .with_attribute("a/b/c", AttributeValue::Int(1))
        .with_attribute("Bad_Domain/x", AttributeValue::Int(1))
        .with_attribute("i".repeat(33), AttributeValue::Int(1))
        .with_attribute("long", AttributeValue::String("s".repeat(65)))
        .with_attribute("fits", AttributeValue::String("é".repeat(32)))
        .with_attribute("multibyte", AttributeValue::String("é".repeat(33)))
        .with_attribute("v1", AttributeValue::Version("1.2".into()))
        .with_attribute("v2", AttributeValue::Version("01.2.3".into()))
        .with_attribute("v3", AttributeValue::Version("1.2.3-".into()))
        .with_attribute("v4", AttributeValue::Version("1.2.3-01".into()))
        .with_attribute("v5", AttributeValue::Version("1.2.3+".into()))
        .with_attribute(
            "v6",
            AttributeValue::Version(format!("1.2.3-{}", "a".repeat(60))),
        );
    let problems = validate(DRIVER, &[device]);
    let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
    assert_eq!(
        fields,
        vec![
            "attributes[\"1st\"]",
            "attributes[\"Bad_Domain/x\"]",
            "attributes[\"a-b\"]",
            "attributes[\"a/b/c\"]",
            &format!("attributes[\"{}\"]", "i".repeat(33)),
            "attributes[\"long\"].string",
            "attributes[\"multibyte\"].string",
            "attributes[\"v1\"].version",
            "attributes[\"v2\"].version",
            "attributes[\"v3\"].version",
            "attributes[\"v4\"].version",
            "attributes[\"v5\"].version",
            "attributes[\"v6\"].version",
        ],
        "{problems:#?}"
    );
    assert!(problems.iter().all(|p| p.device.as_deref() == Some("gpu0")));
    assert!(problems[5].message.contains("65 bytes"));
    assert!(problems[6].message.contains("66 bytes"), "é is two bytes");
    assert!(problems[7].message.contains("MAJOR.MINOR.PATCH"));
    assert!(problems[12].message.contains("66 bytes"));
}

#[test]
fn keys_that_qualify_to_the_same_name_clash() {
    let device = DraDevice::new("gpu0")
        .with_attribute("model", AttributeValue::Int(1))
        .with_attribute("gpu.example.com/model", AttributeValue::Int(2));
    let problems = validate(DRIVER, &[device]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].message.contains("\"gpu.example.com/model\""));
}

#[test]
fn taints_are_checked() {
    let taint = |key: &str, value: &str| DeviceTaint {
        key: key.into(),
        value: value.into(),
        effect: TaintEffect::NoExecute,
    };
    let mut many = DraDevice::new("many");
    for index in 0..17 {
        many = many.with_taint(taint(&format!("t{index}"), ""));
    }
    let bad = DraDevice::new("bad")
        .with_taint(taint("example.com/ok", "fine_value-1.0"))
        .with_taint(taint("", ""))
        .with_taint(taint("Bad_Prefix/x", ""))
        .with_taint(taint("example.com/-x", ""))
        .with_taint(taint("k", "has space"))
        .with_taint(taint("k", &"v".repeat(64)));
    let problems = validate(DRIVER, &[many, bad]);
    assert_eq!(
        fields_of(&problems),
        vec![
            (Some("many"), "taints"),
            (Some("bad"), "taints[1].key"),
            (Some("bad"), "taints[2].key"),
            (Some("bad"), "taints[3].key"),
            (Some("bad"), "taints[4].value"),
            (Some("bad"), "taints[5].value"),
        ],
        "{problems:#?}"
    );
    assert!(problems[0].message.contains("17 taints"));
}

#[test]
fn semver_accepts_the_spec_examples() {
    for good in [
        "0.0.0",
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-0.3.7",
        "1.0.0-x.7.z.92",
        "1.0.0+20130313144700",
        "1.0.0-beta+exp.sha.5114f85",
        "10.20.30",
    ] {
        assert_eq!(super::semver_problem(good), None, "{good}");
    }
    for bad in [
        "1",
        "1.2",
        "1.2.3.4",
        "v1.2.3",
        "1.2.x",
        "1.2.3-a..b",
        "1.2.3+a+b",
        "-1.2.3",
    ] {
        assert!(super::semver_problem(bad).is_some(), "{bad}");
    }
}

// ---- pools: counter sets, partitions, capacities, per-version limits ----

use crate::device::Capacity;
use crate::pool::{CounterSet, PoolContent};
use crate::version::ServerVersion;

fn names(content: &PoolContent) -> Vec<&str> {
    content.devices.iter().map(|d| d.name.as_str()).collect()
}

fn gpu_pool() -> PoolContent {
    PoolContent {
        counter_sets: vec![CounterSet::new(
            "gpu0-counters",
            [("memory", "40Gi"), ("slices", "2")],
        )],
        devices: vec![
            DraDevice::new("gpu0")
                .consuming("gpu0-counters", [("memory", "40Gi"), ("slices", "2")]),
            DraDevice::new("gpu0-half0")
                .consuming("gpu0-counters", [("memory", "20Gi"), ("slices", "1")])
                .partition_of("gpu0"),
            DraDevice::new("gpu0-half1")
                .consuming("gpu0-counters", [("memory", "20Gi"), ("slices", "1")])
                .partition_of("gpu0"),
        ],
    }
}

#[test]
fn a_good_partitioned_pool_is_kept_whole_on_every_version() {
    for version in [ServerVersion::V1_34, ServerVersion::V1_35] {
        let check = validate_pool(DRIVER, &gpu_pool(), version);
        assert_eq!(check.problems, vec![], "{version}");
        assert_eq!(check.content, gpu_pool(), "{version}");
    }
}

#[test]
fn a_bad_device_is_left_out_and_the_rest_kept() {
    let mut pool = gpu_pool();
    pool.devices[1] = pool.devices[1]
        .clone()
        .with_attribute("s", AttributeValue::String("s".repeat(65)));
    pool.devices
        .push(DraDevice::new("gpu0-half2").partition_of("gpu9"));
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_35);
    assert_eq!(
        fields_of(&check.problems),
        vec![
            (Some("gpu0-half0"), "attributes[\"s\"].string"),
            (Some("gpu0-half2"), "partitionOf")
        ]
    );
    assert!(
        check.problems[1]
            .message
            .contains("no whole device named \"gpu9\"")
    );
    assert_eq!(names(&check.content), vec!["gpu0", "gpu0-half1"]);
    assert_eq!(check.content.counter_sets.len(), 1);
}

#[test]
fn a_bad_counter_set_is_left_out_with_its_consumers() {
    let mut pool = gpu_pool();
    pool.counter_sets[0]
        .counters
        .insert("Power".into(), "300".into());
    pool.devices.push(DraDevice::new("nic0"));
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_35);
    assert_eq!(
        fields_of(&check.problems),
        vec![
            (
                None,
                "sharedCounters[\"gpu0-counters\"].counters[\"Power\"]"
            ),
            (Some("gpu0"), "consumesCounters[0].counterSet"),
            (Some("gpu0-half0"), "consumesCounters[0].counterSet"),
            (Some("gpu0-half1"), "consumesCounters[0].counterSet"),
        ]
    );
    assert_eq!(names(&check.content), vec!["nic0"]);
    assert!(check.content.counter_sets.is_empty());
    assert!(
        check.problems[0]
            .to_string()
            .starts_with("sharedCounters[\"gpu0-counters\"]")
    );
}

#[test]
fn counter_set_names_are_unique_in_the_pool() {
    let mut pool = gpu_pool();
    pool.counter_sets.push(pool.counter_sets[0].clone());
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_35);
    assert_eq!(
        fields_of(&check.problems),
        vec![(None, "sharedCounters[\"gpu0-counters\"].name")]
    );
    // The first set of the name stays, with its consumers.
    assert_eq!(check.content.counter_sets.len(), 1);
    assert_eq!(check.content.devices.len(), 3);
}

#[test]
fn on_1_34_a_group_too_big_for_one_slice_is_cut() {
    // 17 sets of 2 counters each consumed by one device: 34 counters tied
    // together, more than one 1.34 slice holds; on 1.35 sets stand alone.
    let mut pool = PoolContent::default();
    let mut bridge = DraDevice::new("bridge");
    for i in 0..17 {
        let name = format!("set{i:02}");
        pool.counter_sets
            .push(CounterSet::new(name.clone(), [("a", "1"), ("b", "1")]));
        bridge = bridge.consuming(name, [("a", "1")]);
    }
    pool.devices.push(bridge);
    pool.devices.push(DraDevice::new("other"));
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_34);
    assert_eq!(check.problems.len(), 18, "{:#?}", check.problems);
    assert!(
        check.problems[0].message.contains("34 counters"),
        "{}",
        check.problems[0]
    );
    assert_eq!(names(&check.content), vec!["other"]);
    assert!(check.content.counter_sets.is_empty());

    // 130 consumers of one set: 128 fit a slice, the last 2 by name do not.
    let mut pool = PoolContent {
        counter_sets: vec![CounterSet::new("s", [("a", "200")])],
        devices: (0..130)
            .map(|i| DraDevice::new(format!("d{i:03}")).consuming("s", [("a", "1")]))
            .collect(),
    };
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_34);
    assert_eq!(
        fields_of(&check.problems),
        vec![
            (Some("d128"), "consumesCounters"),
            (Some("d129"), "consumesCounters")
        ]
    );
    assert_eq!(check.content.devices.len(), 128);
    assert!(
        validate_pool(DRIVER, &pool, ServerVersion::V1_35)
            .problems
            .is_empty()
    );

    // A taint among them makes it 64.
    pool.devices[0] = pool.devices[0].clone().with_taint(DeviceTaint {
        key: "gpu.example.com/unhealthy".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    });
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_34);
    assert_eq!(check.content.devices.len(), 64);
}

#[test]
fn taint_limits_follow_the_version() {
    let mut device = DraDevice::new("gpu0");
    for i in 0..5 {
        device = device.with_taint(DeviceTaint {
            key: format!("example.com/t{i}"),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
    }
    let pool = PoolContent::from_devices(vec![device]);
    let on_1_34 = validate_pool(DRIVER, &pool, ServerVersion::V1_34);
    assert_eq!(fields_of(&on_1_34.problems), vec![(Some("gpu0"), "taints")]);
    assert!(on_1_34.content.devices.is_empty());
    assert!(
        validate_pool(DRIVER, &pool, ServerVersion::V1_35)
            .problems
            .is_empty()
    );
}

#[test]
fn attributes_and_capacities_count_together() {
    let mut device = DraDevice::new("gpu0");
    for i in 0..30 {
        device = device.with_attribute(format!("a{i}"), AttributeValue::Int(i));
    }
    let fine = device
        .clone()
        .with_capacity("c0", Capacity::new("1"))
        .with_capacity("c1", Capacity::new("1"));
    assert_eq!(validate(DRIVER, std::slice::from_ref(&fine)), vec![]);
    let crowded = fine.with_capacity("c2", Capacity::new("1"));
    let problems = validate(DRIVER, &[crowded]);
    assert_eq!(fields_of(&problems), vec![(Some("gpu0"), "attributes")]);
    assert!(
        problems[0]
            .message
            .contains("30 attributes and 3 capacities")
    );
}

#[test]
fn a_plain_device_list_cannot_consume_counters() {
    let device = DraDevice::new("gpu0").consuming("gpu0-counters", [("memory", "1Gi")]);
    assert_eq!(
        fields_of(&validate(DRIVER, &[device])),
        vec![(Some("gpu0"), "consumesCounters[0].counterSet")]
    );
}

#[test]
fn the_none_effect_and_sixteen_taints_need_1_35() {
    let mut device = DraDevice::new("gpu0");
    for i in 0..16 {
        device = device.with_taint(DeviceTaint {
            key: format!("example.com/t{i}"),
            value: String::new(),
            effect: if i == 0 {
                TaintEffect::None
            } else {
                TaintEffect::NoSchedule
            },
        });
    }
    let pool = PoolContent::from_devices(vec![device.clone()]);
    for minor in [35, 37] {
        let version = ServerVersion { major: 1, minor };
        let check = validate_pool(DRIVER, &pool, version);
        assert!(check.problems.is_empty(), "1.{minor}: {:?}", check.problems);
        assert_eq!(check.content.devices.len(), 1);
    }
    let mut seventeen = device.clone();
    seventeen.taints.push(DeviceTaint {
        key: "example.com/t16".into(),
        value: String::new(),
        effect: TaintEffect::None,
    });
    let check = validate_pool(
        DRIVER,
        &PoolContent::from_devices(vec![seventeen]),
        ServerVersion::V1_35,
    );
    assert_eq!(fields_of(&check.problems), vec![(Some("gpu0"), "taints")]);

    // On 1.34 a None taint is refused even among few.
    let mut few = DraDevice::new("gpu0");
    few.taints = device.taints[..2].to_vec();
    let pool = PoolContent::from_devices(vec![few]);
    let check = validate_pool(DRIVER, &pool, ServerVersion::V1_34);
    assert_eq!(
        fields_of(&check.problems),
        vec![(Some("gpu0"), "taints[0].effect")]
    );
    assert!(
        check.problems[0].message.contains("1.35"),
        "{:?}",
        check.problems
    );
    // What the publisher sends to 1.34 instead: the device without it.
    let fitted = without_unknown_effects(&pool, ServerVersion::V1_34);
    assert_eq!(fitted.devices[0].taints, device.taints[1..2]);
    assert!(
        validate_pool(DRIVER, &fitted, ServerVersion::V1_34)
            .problems
            .is_empty()
    );
    assert_eq!(without_unknown_effects(&pool, ServerVersion::V1_35), pool);
}

#[test]
fn effects_read_back_as_the_api_spells_them() {
    for effect in [
        TaintEffect::None,
        TaintEffect::NoSchedule,
        TaintEffect::NoExecute,
    ] {
        assert_eq!(effect.as_str().parse::<TaintEffect>(), Ok(effect));
    }
    assert_eq!(TaintEffect::None.to_string(), "None");
    assert!("none".parse::<TaintEffect>().is_err());
}
