//! `validate_pool` against the fake API server's own validation, on 1.34 and
//! 1.35: a pool it passes is accepted slice by slice, one it flags has a
//! slice rejected on the field it names. Only rules the server checks on
//! each slice are here: that a device consumes no more than a counter set
//! has, that counters are not negative and that a partition names a whole
//! device are this crate's own.

use crate::common::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use wdp_dra_client::{
    AttributeValue, Capacity, CapacityPolicy, CapacityRange, CounterSet, DeviceTaint, DraDevice,
    PoolContent, ServerVersion, TaintEffect, plan_pool, validate_pool,
};
use wdp_fake_apiserver::ResourceSlice;

fn gpu_pool() -> PoolContent {
    PoolContent {
        counter_sets: vec![CounterSet::new(
            "gpu0-counters",
            [("memory", "40Gi"), ("slices", "4")],
        )],
        devices: vec![
            DraDevice::new("gpu0")
                .consuming("gpu0-counters", [("memory", "40Gi"), ("slices", "4")]),
            DraDevice::new("gpu0-part0")
                .consuming("gpu0-counters", [("memory", "10Gi"), ("slices", "1")])
                .partition_of("gpu0"),
        ],
    }
}

fn shared(policy: CapacityPolicy) -> PoolContent {
    PoolContent::from_devices(vec![
        DraDevice::new("nic0")
            .shared()
            .with_capacity("bandwidth", Capacity::new("100G").with_policy(policy)),
    ])
}

fn range(min: &str, max: Option<&str>, step: Option<&str>) -> Option<CapacityRange> {
    Some(CapacityRange {
        min: min.into(),
        max: max.map(Into::into),
        step: step.map(Into::into),
    })
}

fn cases(version: ServerVersion) -> Vec<(&'static str, PoolContent)> {
    let mut cases = vec![("partitions", gpu_pool())];

    let mut bad_set_name = gpu_pool();
    bad_set_name.counter_sets[0].name = "GPU_0".into();
    bad_set_name.devices.clear();
    cases.push(("bad set name", bad_set_name));

    let mut bad_counter = gpu_pool();
    bad_counter.counter_sets[0]
        .counters
        .insert("Power".into(), "1".into());
    bad_counter.devices.clear();
    cases.push(("bad counter name", bad_counter));

    let mut crowded_set = gpu_pool();
    crowded_set.counter_sets[0].counters = (0..33).map(|i| (format!("c{i}"), "1".into())).collect();
    crowded_set.devices.clear();
    cases.push(("33 counters", crowded_set));

    let mut bad_consumed_name = gpu_pool();
    bad_consumed_name.devices[1] = DraDevice::new("gpu0-part0")
        .consuming("gpu0-counters", [("Memory", "1Gi")])
        .partition_of("gpu0");
    cases.push(("bad consumed counter name", bad_consumed_name));

    if version.separates_counter_sets() {
        let mut three = gpu_pool();
        for name in ["a", "b"] {
            three
                .counter_sets
                .push(CounterSet::new(name, [("memory", "1Gi")]));
        }
        three.devices.push(
            DraDevice::new("greedy")
                .consuming("gpu0-counters", [("memory", "1Gi")])
                .consuming("a", [("memory", "1Gi")])
                .consuming("b", [("memory", "1Gi")]),
        );
        cases.push(("three consumptions", three));
    } else {
        let mut missing = gpu_pool();
        missing
            .devices
            .push(DraDevice::new("lost").consuming("gpu9-counters", [("memory", "1Gi")]));
        cases.push(("a set of no slice", missing));

        let mut undefined = gpu_pool();
        undefined
            .devices
            .push(DraDevice::new("odd").consuming("gpu0-counters", [("power", "1")]));
        cases.push(("a counter the set lacks", undefined));

        let mut tainted = DraDevice::new("gpu0");
        for i in 0..5 {
            tainted = tainted.with_taint(DeviceTaint {
                key: format!("example.com/t{i}"),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
        }
        cases.push(("5 taints", PoolContent::from_devices(vec![tainted])));
    }

    cases.push((
        "good values",
        shared(CapacityPolicy {
            default: Some("10G".into()),
            valid_values: vec!["1G".into(), "10G".into(), "100G".into()],
            valid_range: None,
        }),
    ));
    cases.push((
        "good range",
        shared(CapacityPolicy {
            default: Some("2G".into()),
            valid_values: Vec::new(),
            valid_range: range("1G", Some("99G"), Some("1G")),
        }),
    ));
    cases.push((
        "unsorted values",
        shared(CapacityPolicy {
            default: Some("10G".into()),
            valid_values: vec!["10G".into(), "1G".into()],
            valid_range: None,
        }),
    ));
    cases.push((
        "default not a value",
        shared(CapacityPolicy {
            default: Some("5G".into()),
            valid_values: vec!["1G".into(), "10G".into()],
            valid_range: None,
        }),
    ));
    cases.push((
        "11 values",
        shared(CapacityPolicy {
            default: Some("1".into()),
            valid_values: (1..=11).map(|i| i.to_string()).collect(),
            valid_range: None,
        }),
    ));
    cases.push((
        "min above max",
        shared(CapacityPolicy {
            default: Some("50G".into()),
            valid_values: Vec::new(),
            valid_range: range("50G", Some("40G"), None),
        }),
    ));
    cases.push((
        "zero step",
        shared(CapacityPolicy {
            default: Some("1G".into()),
            valid_values: Vec::new(),
            valid_range: range("1G", None, Some("0")),
        }),
    ));
    cases.push((
        "default off-step",
        shared(CapacityPolicy {
            default: Some("4G".into()),
            valid_values: Vec::new(),
            valid_range: range("1G", Some("9G"), Some("2G")),
        }),
    ));
    cases.push((
        "policy without sharing",
        PoolContent::from_devices(vec![DraDevice::new("nic0").with_capacity(
            "bandwidth",
            Capacity::new("100G").with_policy(CapacityPolicy::default()),
        )]),
    ));
    let mut crowded = DraDevice::new("crowded");
    for i in 0..30 {
        crowded = crowded.with_attribute(format!("a{i}"), AttributeValue::Int(i));
    }
    for i in 0..3 {
        crowded = crowded.with_capacity(format!("c{i}"), Capacity::new("1"));
    }
    cases.push((
        "33 attributes and capacities",
        PoolContent::from_devices(vec![crowded]),
    ));
    cases.push((
        "bad capacity key",
        PoolContent::from_devices(vec![
            DraDevice::new("nic0").with_capacity("1st", Capacity::new("1")),
        ]),
    ));
    cases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_pool_flags_exactly_what_the_server_rejects() {
    for version in [ServerVersion::V1_34, ServerVersion::V1_35] {
        let cluster = Cluster::start().await;
        cluster.server.set_served_minor(version.minor);
        let api: Api<ResourceSlice> = Api::all(cluster.client.clone());
        for (case, content) in cases(version) {
            let problems = validate_pool(DRIVER, &content, version).problems;
            let mut rejection = None;
            for spec in plan_pool(&target(), &content, version, 1) {
                let slice = ResourceSlice {
                    metadata: ObjectMeta {
                        generate_name: Some("check-".into()),
                        ..ObjectMeta::default()
                    },
                    spec,
                };
                let answer = within(case, api.create(&PostParams::default(), &slice)).await;
                match answer {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if rejection.is_none() => {
                        rejection = Some(status);
                    }
                    Err(kube::Error::Api(_)) => {}
                    Err(error) => panic!("{version} {case}: {error}"),
                }
            }
            match (problems.first(), rejection) {
                (None, None) => {}
                (Some(problem), Some(status)) => {
                    assert!(
                        status.code == 422 || status.code == 400,
                        "{version} {case}: {status:?}"
                    );
                    let field = problem.field.split(['[', '.']).next().unwrap();
                    assert!(
                        status.message.contains(field),
                        "{version} {case}: we say {problem}, the server says {}",
                        status.message
                    );
                }
                (None, Some(status)) => panic!(
                    "{version} {case}: the server refused with {} (validate_pool: no problem)",
                    status.message
                ),
                (Some(problem), None) => {
                    panic!(
                        "{version} {case}: validate_pool flags {problem}, the server accepted it"
                    )
                }
            }
        }
    }
}
