//! Device capacities through kube-rs, on every served version: keys, the attribute-plus-capacity
//! limit, the consumable-capacity request policy (only with `allowMultipleAllocations`, either
//! `validValues` or a `validRange`, with a default inside), and quantities the server cannot
//! decode (400).

use std::collections::BTreeMap;

use crate::common::{api_error, assert_invalid, slice, start};
use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceAttribute, DeviceCapacity,
    ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, PostParams};

fn q(text: &str) -> Quantity {
    Quantity(text.into())
}

fn range(default: &str, min: &str, max: Option<&str>, step: Option<&str>) -> CapacityRequestPolicy {
    CapacityRequestPolicy {
        default: Some(q(default)),
        valid_range: Some(CapacityRequestPolicyRange {
            min: q(min),
            max: max.map(q),
            step: step.map(q),
        }),
        valid_values: None,
    }
}

fn values(default: Option<&str>, options: &[&str]) -> CapacityRequestPolicy {
    CapacityRequestPolicy {
        default: default.map(q),
        valid_range: None,
        valid_values: Some(options.iter().map(|o| q(o)).collect()),
    }
}

/// A shareable device `gpu` with `memory` (40Gi, a range policy) and `cores` (8, a values policy).
fn shareable(name: &str) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &["gpu"]);
    let device = &mut s.spec.devices.as_mut().unwrap()[0];
    device.allow_multiple_allocations = Some(true);
    device.capacity = Some(BTreeMap::from([
        (
            "memory".to_string(),
            DeviceCapacity {
                value: q("40Gi"),
                request_policy: Some(range("1Gi", "1Gi", Some("40Gi"), Some("1Gi"))),
            },
        ),
        (
            "example.com/cores".to_string(),
            DeviceCapacity {
                value: q("8"),
                request_policy: Some(values(Some("2"), &["1", "2", "4", "8"])),
            },
        ),
    ]));
    s
}

fn policy<'a>(s: &'a mut ResourceSlice, key: &str) -> &'a mut CapacityRequestPolicy {
    s.spec.devices.as_mut().unwrap()[0]
        .capacity
        .as_mut()
        .unwrap()
        .get_mut(key)
        .unwrap()
        .request_policy
        .as_mut()
        .unwrap()
}

type Break = fn(&mut ResourceSlice);

const MEMORY: &str = "spec.devices[0].capacity[memory].requestPolicy";

const CASES: &[(&str, Break, &str, &str)] = &[
    (
        "a policy without allowMultipleAllocations",
        |s| s.spec.devices.as_mut().unwrap()[0].allow_multiple_allocations = None,
        MEMORY,
        "Forbidden: allowMultipleAllocations must be true",
    ),
    (
        "values and a range",
        |s| policy(s, "memory").valid_values = Some(vec![q("1Gi")]),
        MEMORY,
        "exactly one policy can be specified",
    ),
    (
        "unsorted values",
        |s| *policy(s, "example.com/cores") = values(Some("2"), &["1", "4", "2"]),
        "spec.devices[0].capacity[example.com/cores].requestPolicy.validValues[2]",
        "Invalid value: \"2\": values must be sorted in ascending order",
    ),
    (
        "11 values",
        |s| {
            *policy(s, "example.com/cores") = values(
                Some("1"),
                &["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"],
            )
        },
        "spec.devices[0].capacity[example.com/cores].requestPolicy.validValues",
        "Too many: 11: must have at most 10 items",
    ),
    (
        "values without a default",
        |s| policy(s, "example.com/cores").default = None,
        "spec.devices[0].capacity[example.com/cores].requestPolicy.default",
        "Required value: required when validValues is defined",
    ),
    (
        "a default not among the values",
        |s| policy(s, "example.com/cores").default = Some(q("3")),
        "spec.devices[0].capacity[example.com/cores].requestPolicy.validValues",
        "Invalid value: \"3\": default value is not valid according to the requestPolicy",
    ),
    (
        "a value above the capacity",
        |s| *policy(s, "example.com/cores") = values(Some("2"), &["1", "2", "16"]),
        "spec.devices[0].capacity[example.com/cores].requestPolicy.validValues[2]",
        "option is larger than capacity value: 8",
    ),
    (
        "a value twice",
        |s| *policy(s, "example.com/cores") = values(Some("2"), &["2", "2000m"]),
        "spec.devices[0].capacity[example.com/cores].requestPolicy.validValues[1]",
        "Duplicate value: \"2000m\"",
    ),
    (
        "a range without a default",
        |s| policy(s, "memory").default = None,
        "spec.devices[0].capacity[memory].requestPolicy.default",
        "Required value: required when validRange is defined",
    ),
    (
        "min above max",
        |s| *policy(s, "memory") = range("8Gi", "8Gi", Some("4Gi"), None),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.max",
        "min is larger than max: 4Gi",
    ),
    (
        "max above the capacity",
        |s| *policy(s, "memory") = range("1Gi", "1Gi", Some("41Gi"), None),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.max",
        "max is larger than capacity value: 40Gi",
    ),
    (
        "min above the capacity",
        |s| *policy(s, "memory") = range("50Gi", "50Gi", None, None),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.min",
        "min is larger than capacity value: 40Gi",
    ),
    (
        "a default below min",
        |s| *policy(s, "memory") = range("512Mi", "1Gi", None, None),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.default",
        "default is less than min: 1Gi",
    ),
    (
        "a default above max",
        |s| *policy(s, "memory") = range("8Gi", "1Gi", Some("4Gi"), None),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.default",
        "default is more than max: 4Gi",
    ),
    (
        "a zero step",
        |s| *policy(s, "memory") = range("1Gi", "1Gi", None, Some("0")),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.step",
        "must be greater than zero",
    ),
    (
        "a default off the steps",
        |s| *policy(s, "memory") = range("1536Mi", "1Gi", None, Some("1Gi")),
        "spec.devices[0].capacity[memory].requestPolicy.validRange.step",
        "Invalid value: \"1536Mi\": value is not a multiple of a given step (1Gi) from (1Gi)",
    ),
    (
        "a capacity key that is not a C identifier",
        |s| {
            let capacity = s.spec.devices.as_mut().unwrap()[0]
                .capacity
                .as_mut()
                .unwrap();
            let memory = capacity.remove("memory").unwrap();
            capacity.insert("example.com/gpu-memory".into(), memory);
        },
        "spec.devices[0].capacity[example.com/gpu-memory]",
        "C identifier",
    ),
    (
        "31 attributes and 2 capacities",
        |s| {
            s.spec.devices.as_mut().unwrap()[0].attributes = Some(
                (0..31)
                    .map(|i| {
                        (
                            format!("a{i}"),
                            DeviceAttribute {
                                int: Some(i),
                                ..Default::default()
                            },
                        )
                    })
                    .collect(),
            )
        },
        "spec.devices[0]",
        "Invalid value: 33: the total number of attributes and capacities must not exceed 32",
    ),
];

#[tokio::test]
async fn request_policies_are_checked_on_every_version() {
    for minor in [34, 35, 36, 37] {
        let h = start().await;
        h.server.set_served_minor(minor);
        let api: Api<ResourceSlice> = Api::all(h.client.clone());
        let post = PostParams::default();
        let created = api
            .create(&post, &shareable("ok"))
            .await
            .expect("a valid shareable device");
        assert_eq!(created.spec, shareable("ok").spec, "nothing dropped");
        let mut at_limits = shareable("limits");
        *policy(&mut at_limits, "memory") = range("40Gi", "0", Some("40Gi"), Some("40Gi"));
        *policy(&mut at_limits, "example.com/cores") = values(
            Some("8"),
            &["500m", "1", "1500m", "2", "3", "4", "5", "6", "7", "8"],
        );
        api.create(&post, &at_limits)
            .await
            .expect("10 values; default, max and one step at the capacity");
        for (what, mutate, path, words) in CASES {
            let mut broken = shareable("broken");
            mutate(&mut broken);
            assert_invalid(
                api.create(&post, &broken).await,
                path,
                words,
                &format!("1.{minor} {what}"),
            );
        }
        assert_eq!(h.server.slices().len(), 2);
    }
}

#[tokio::test]
async fn a_quantity_the_server_cannot_decode_is_a_bad_request() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    for text in ["1 Gi", "1K", "Gi", ""] {
        let mut s = shareable("bad");
        policy(&mut s, "memory").default = Some(q(text));
        let status = api_error(api.create(&PostParams::default(), &s).await);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (400, "BadRequest"),
            "{text:?}: {}",
            status.message
        );
        assert!(
            status
                .message
                .contains("ResourceSlice in version \"v1\" cannot be handled as a ResourceSlice"),
            "{}",
            status.message
        );
    }
    let mut s = shareable("bad");
    s.spec.devices.as_mut().unwrap()[0]
        .capacity
        .as_mut()
        .unwrap()
        .get_mut("memory")
        .unwrap()
        .value = q("40 Gi");
    let status = api_error(api.create(&PostParams::default(), &s).await);
    assert!(
        status
            .message
            .contains("quantities must match the regular expression"),
        "{}",
        status.message
    );
    assert!(h.server.slices().is_empty());
}
