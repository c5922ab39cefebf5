//! Tests of `devices`: names, typed attributes, NUMA node, taints.

use std::collections::BTreeMap;

use wdp_dra_client::{AttributeValue, TaintEffect};
use wdp_policy::types::{Device, Verdict};

use super::*;
use crate::standard_attributes::NUMA_NODE;

const DRIVER: &str = "gpu.example.com";

fn device(id: &str, numa: &[i64], attributes: &[(&str, &str)], replicas: u32) -> Device {
    Device {
        id: id.into(),
        candidates: vec![id.into()],
        numa_nodes: numa.to_vec(),
        attributes: attributes
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        replicas,
    }
}

fn set(devices: &[Device], unhealthy: &[(&str, &str)]) -> DeviceSet {
    let verdicts = unhealthy
        .iter()
        .map(|(id, reason)| {
            (
                id.to_string(),
                Verdict {
                    id: id.to_string(),
                    healthy: false,
                    reason: reason.to_string(),
                },
            )
        })
        .collect();
    DeviceSet::build(devices, &verdicts, &BTreeMap::new())
}

#[test]
fn every_advertised_id_becomes_a_named_device_that_maps_back() {
    let set = set(
        &[
            device("0000:3b:00.0", &[0], &[], 0),
            device("fuse", &[], &[], 2),
        ],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    assert!(list.problems.is_empty(), "{:?}", list.problems);
    let names: Vec<&str> = list.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names.len(), 3);
    let ids: Vec<String> = names
        .iter()
        .map(|name| naming::device_id(name).unwrap())
        .collect();
    assert_eq!(ids, ["0000:3b:00.0", "fuse::0", "fuse::1"]);
    assert!(list.devices.iter().all(|d| d.taints.is_empty()));
}

#[test]
fn attributes_are_typed_and_qualified_by_the_driver() {
    let set = set(
        &[device(
            "gpu0",
            &[1],
            &[
                ("pci.vendor", "0x10de"),
                ("Memory-MiB", "81920"),
                ("offset", "-3"),
                ("sriov", "true"),
                ("busy", "false"),
                ("driver.version", "550.54.15"),
                ("fw", "1.2.3-rc.1+build.5"),
                ("model", "NVIDIA H100 80GB HBM3"),
                ("plus", "+5"),
                ("huge", "99999999999999999999"),
            ],
            0,
        )],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    assert!(list.problems.is_empty(), "{:?}", list.problems);
    let attributes = &list.devices[0].attributes;
    let expect = |key: &str, value: AttributeValue| {
        assert_eq!(attributes.get(key), Some(&value), "{key} in {attributes:?}");
    };
    expect(NUMA_NODE, AttributeValue::Int(1));
    expect(
        "gpu.example.com/pci_vendor",
        AttributeValue::String("0x10de".into()),
    );
    expect("gpu.example.com/memory_mib", AttributeValue::Int(81920));
    expect("gpu.example.com/offset", AttributeValue::Int(-3));
    expect("gpu.example.com/sriov", AttributeValue::Bool(true));
    expect("gpu.example.com/busy", AttributeValue::Bool(false));
    expect(
        "gpu.example.com/driver_version",
        AttributeValue::Version("550.54.15".into()),
    );
    expect(
        "gpu.example.com/fw",
        AttributeValue::Version("1.2.3-rc.1+build.5".into()),
    );
    expect(
        "gpu.example.com/model",
        AttributeValue::String("NVIDIA H100 80GB HBM3".into()),
    );
    expect("gpu.example.com/plus", AttributeValue::String("+5".into()));
    // Out of i64 range: a string, not a wrapped number.
    expect(
        "gpu.example.com/huge",
        AttributeValue::String("99999999999999999999".into()),
    );
    assert_eq!(attributes.len(), 11);
    assert!(
        wdp_dra_client::validate(DRIVER, &list.devices).is_empty(),
        "{:?}",
        wdp_dra_client::validate(DRIVER, &list.devices)
    );
}

#[test]
fn numa_node_only_when_exactly_one() {
    let set = set(
        &[device("a", &[], &[], 0), device("b", &[0, 1], &[], 0)],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    assert!(
        list.devices
            .iter()
            .all(|d| !d.attributes.contains_key(NUMA_NODE))
    );
}

#[test]
fn identifiers_follow_the_c_identifier_rule() {
    assert_eq!(attribute_id("pci.vendor").as_deref(), Some("pci_vendor"));
    assert_eq!(
        attribute_id("Link/Group-0").as_deref(),
        Some("link_group_0")
    );
    assert_eq!(attribute_id("0x.Foo").as_deref(), Some("_0x_foo"));
    assert_eq!(attribute_id("..."), None);
    assert_eq!(attribute_id(""), None);
    let long = attribute_id(&"a".repeat(50)).unwrap();
    assert_eq!(long.len(), MAX_ATTRIBUTE_ID);
}

#[test]
fn long_values_collisions_and_unusable_keys_are_dropped_and_named() {
    let long = "x".repeat(MAX_ATTRIBUTE_VALUE + 1);
    let set = set(
        &[device(
            "gpu0",
            &[],
            &[
                ("serial", long.as_str()),
                ("pci.vendor", "0x10de"),
                ("pci_vendor", "0x1002"),
                ("--", "x"),
                ("ok", &"y".repeat(MAX_ATTRIBUTE_VALUE)),
            ],
            0,
        )],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    let attributes = &list.devices[0].attributes;
    assert_eq!(
        attributes.get("gpu.example.com/pci_vendor"),
        Some(&AttributeValue::String("0x10de".into()))
    );
    assert!(attributes.contains_key("gpu.example.com/ok"));
    assert_eq!(attributes.len(), 2, "{attributes:?}");
    let messages: Vec<String> = list.problems.iter().map(ToString::to_string).collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages[0].contains("\"serial\"") && messages[0].contains("65 characters"));
    assert!(messages[1].contains("\"pci_vendor\"") && messages[1].contains("\"pci.vendor\""));
    assert!(messages[2].contains("\"--\""));
    assert!(messages.iter().all(|m| m.contains("\"gpu0\"")));
}

#[test]
fn at_most_32_attributes_numa_first() {
    let keys: Vec<String> = (0..40).map(|n| format!("k{n:02}")).collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
    let set = set(&[device("gpu0", &[0], &pairs, 0)], &[]);
    let list = dra_devices(DRIVER, &set);
    let attributes = &list.devices[0].attributes;
    assert_eq!(attributes.len(), MAX_ATTRIBUTES);
    assert!(attributes.contains_key(NUMA_NODE));
    assert!(attributes.contains_key("gpu.example.com/k30"));
    assert!(!attributes.contains_key("gpu.example.com/k31"));
    assert_eq!(list.problems.len(), 9);
}

#[test]
fn an_id_without_a_dns_name_is_left_out_and_named() {
    let long_id = "z".repeat(70);
    let set = set(
        &[device(&long_id, &[], &[], 0), device("ok", &[], &[], 0)],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    assert_eq!(list.devices.len(), 1);
    assert_eq!(list.devices[0].name, "ok");
    assert!(matches!(&list.problems[..], [DeviceProblem::Unnamed { id, .. }] if *id == long_id));
}

#[test]
fn unhealthy_devices_carry_the_driver_taint_and_healthy_ones_none() {
    let devices = [device("gpu0", &[], &[], 0), device("gpu1", &[], &[], 0)];
    let sick = set(&devices, &[("gpu1", "GPU fell off the bus (Xid 79)")]);
    let list = dra_devices(DRIVER, &sick);
    assert!(list.devices[0].taints.is_empty());
    let taint = &list.devices[1].taints[..];
    assert_eq!(taint.len(), 1);
    assert_eq!(taint[0].key, "gpu.example.com/unhealthy");
    assert_eq!(taint[0].value, "GPU-fell-off-the-bus-Xid-79");
    assert_eq!(taint[0].effect, TaintEffect::NoSchedule);
    assert!(wdp_dra_client::validate(DRIVER, &list.devices).is_empty());

    // Recovery: the same devices, healthy again, carry no taint.
    let healed = dra_devices(DRIVER, &set(&devices, &[]));
    assert!(healed.devices.iter().all(|d| d.taints.is_empty()));
}

#[test]
fn taint_values_are_label_safe() {
    assert_eq!(taint_value("too hot"), "too-hot");
    assert_eq!(taint_value("  (gone)  "), "gone");
    assert_eq!(taint_value("-._x_.-"), "x");
    assert_eq!(taint_value(""), NO_REASON_TAINT_VALUE);
    assert_eq!(taint_value("!!!"), NO_REASON_TAINT_VALUE);
    assert_eq!(taint_value("température élevée"), "temp-rature-lev-e");
    let long = taint_value(&"word ".repeat(40));
    assert!(long.len() <= MAX_TAINT_VALUE, "{long}");
    assert!(
        long.ends_with(|c: char| c.is_ascii_alphanumeric()),
        "{long}"
    );
    for value in [long.as_str(), "too-hot", NO_REASON_TAINT_VALUE] {
        assert!(
            value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        );
    }
}

#[test]
fn a_path_too_long_to_publish_is_left_out_quietly_when_its_root_is_published() {
    let deep = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
    let set = set(
        &[
            device("0000:18:00.0", &[], &[("pci.path", deep)], 0),
            // No root complex in it: the long path is reported as before.
            device("odd", &[], &[("pci.path", &"/x".repeat(40))], 0),
        ],
        &[],
    );
    let list = dra_devices(DRIVER, &set);
    let gpu = &list.devices[0].attributes;
    assert_eq!(
        gpu.get("resource.kubernetes.io/pcieRoot"),
        Some(&AttributeValue::String("pci0000:15".into()))
    );
    assert!(!gpu.contains_key("gpu.example.com/pci_path"));
    assert!(
        matches!(&list.problems[..], [DeviceProblem::AttributeDropped { id, key, .. }] if id == "odd" && key == "pci.path"),
        "{:?}",
        list.problems
    );
}
