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
