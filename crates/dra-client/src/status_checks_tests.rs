//! Unit tests of the device status rules.

use super::*;
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;

const DRIVER: &str = "gpu.example.com";
const POOL: &str = "node-1";
const SHARE: &str = "2f1b9e52-7c55-4d3a-9d1e-8f6b1a0c3e21";

fn result(device: &str, share: Option<&str>) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: "gpu".into(),
        driver: DRIVER.into(),
        pool: POOL.into(),
        device: device.into(),
        share_id: share.map(Into::into),
        ..DeviceRequestAllocationResult::default()
    }
}

fn claim() -> ResourceClaim {
    ResourceClaim {
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![result("gpu0", None), result("nic0", Some(SHARE))]),
                    ..DeviceAllocationResult::default()
                }),
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        }),
        ..ResourceClaim::default()
    }
}

fn entry(device: &str) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: DRIVER.into(),
        pool: POOL.into(),
        device: device.into(),
        ..AllocatedDeviceStatus::default()
    }
}

fn condition(type_: &str, status: &str, reason: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: Time(Timestamp::UNIX_EPOCH),
    }
}

fn fields(problems: &[StatusProblem]) -> Vec<(&str, &str)> {
    problems
        .iter()
        .map(|p| (p.device.as_str(), p.field.as_str()))
        .collect()
}

fn check(entries: &[AllocatedDeviceStatus]) -> Vec<StatusProblem> {
    check_statuses(&claim(), DRIVER, POOL, entries)
}

#[test]
fn good_entries_have_no_problems() {
    let mut gpu = entry("gpu0");
    gpu.conditions = Some(vec![
        condition("Ready", "True", "Prepared"),
        condition("example.com/Healthy", "Unknown", "Probing_2,a:b"),
    ]);
    gpu.data = Some(RawExtension(serde_json::json!({"memory": "40Gi"})));
    let mut nic = entry("nic0");
    nic.share_id = Some(SHARE.into());
    nic.network_data = Some(NetworkDeviceData {
        interface_name: Some("eth1".into()),
        hardware_address: Some("ea:9f:9c:1e:7b:3a".into()),
        ips: Some(vec!["10.9.8.7/24".into(), "2001:db8::1/64".into()]),
    });
    assert_eq!(check(&[gpu, nic]), vec![]);
}

#[test]
fn an_entry_must_match_an_allocation_of_this_driver_and_pool() {
    let mut other_driver = entry("gpu0");
    other_driver.driver = "nic.example.com".into();
    let mut unshared = entry("nic0");
    unshared.share_id = None;
    let problems = check(&[
        entry("gpu1"),
        other_driver,
        unshared,
        entry("gpu0"),
        entry("gpu0"),
    ]);
    assert_eq!(
        fields(&problems),
        vec![
            ("gpu1", "device"),
            ("gpu0", "driver"),
            ("gpu0", "device"),
            ("nic0", "device"),
            ("gpu0", "device"),
        ],
        "{problems:#?}"
    );
    assert!(problems[4].message.contains("same device"));
    assert!(
        check_statuses(&ResourceClaim::default(), DRIVER, POOL, &[entry("gpu0")])
            .iter()
            .any(|p| p.field == "device")
    );
}

#[test]
fn conditions_are_few_typed_and_reasoned() {
    let mut gpu = entry("gpu0");
    gpu.conditions = Some(vec![
        condition("Ready", "Yes", "Prepared"),
        condition("-bad", "True", "Prepared"),
        condition("Ready", "True", ""),
        condition("Other", "False", "ends,"),
        condition("Third", "False", "1st"),
    ]);
    let problems = check(&[gpu.clone()]);
    assert_eq!(
        fields(&problems),
        vec![
            ("gpu0", "conditions[0].status"),
            ("gpu0", "conditions[1].type"),
            ("gpu0", "conditions[2].type"),
            ("gpu0", "conditions[2].reason"),
            ("gpu0", "conditions[3].reason"),
            ("gpu0", "conditions[4].reason"),
        ],
        "{problems:#?}"
    );
    gpu.conditions = Some(
        (0..9)
            .map(|i| condition(&format!("C{i}"), "True", "R"))
            .collect(),
    );
    assert_eq!(fields(&check(&[gpu])), vec![("gpu0", "conditions")]);
}

#[test]
fn data_is_a_small_json_object() {
    let mut gpu = entry("gpu0");
    gpu.data = Some(RawExtension(serde_json::json!(["not", "an", "object"])));
    assert_eq!(fields(&check(&[gpu.clone()])), vec![("gpu0", "data")]);
    gpu.data = Some(RawExtension(
        serde_json::json!({"blob": "x".repeat(10 * 1024)}),
    ));
    let problems = check(&[gpu.clone()]);
    assert_eq!(fields(&problems), vec![("gpu0", "data")]);
    assert!(problems[0].message.contains("10240"), "{problems:?}");
    gpu.data = Some(RawExtension(
        serde_json::json!({"blob": "x".repeat(10 * 1024 - 20)}),
    ));
    assert_eq!(check(&[gpu]), vec![]);
}

#[test]
fn network_data_has_short_names_and_canonical_distinct_addresses() {
    let mut nic = entry("nic0");
    nic.share_id = Some(SHARE.into());
    nic.network_data = Some(NetworkDeviceData {
        interface_name: Some("i".repeat(257)),
        hardware_address: Some("h".repeat(129)),
        ips: Some(vec![
            "10.9.8.7".into(),
            "10.9.8.7/33".into(),
            "2001:DB8::1/64".into(),
            "10.1.1.1/8".into(),
            "10.1.1.1/8".into(),
            "::ffff:1.2.3.4/120".into(),
        ]),
    });
    let problems = check(&[nic.clone()]);
    assert_eq!(
        fields(&problems),
        vec![
            ("nic0", "networkData.interfaceName"),
            ("nic0", "networkData.hardwareAddress"),
            ("nic0", "networkData.ips[0]"),
            ("nic0", "networkData.ips[1]"),
            ("nic0", "networkData.ips[2]"),
            ("nic0", "networkData.ips[4]"),
            ("nic0", "networkData.ips[5]"),
        ],
        "{problems:#?}"
    );
    assert!(
        problems[4].message.contains("\"2001:db8::1/64\""),
        "{}",
        problems[4]
    );
    assert!(
        problems[6].message.contains("\"1.2.3.4/24\""),
        "{}",
        problems[6]
    );
    assert_eq!(problems[0].share_id.as_deref(), Some(SHARE));

    nic.network_data = Some(NetworkDeviceData {
        ips: Some((0..17).map(|i| format!("10.0.0.{i}/24")).collect()),
        ..NetworkDeviceData::default()
    });
    assert_eq!(fields(&check(&[nic])), vec![("nic0", "networkData.ips")]);
}
