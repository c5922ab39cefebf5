//! `validate` against the fake API server's own validation: a device list it
//! passes is accepted, one it flags is rejected, on the field it names.

use crate::common::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use wdp_dra_client::{AttributeValue, DeviceTaint, DraDevice, TaintEffect, plan_slices, validate};
use wdp_fake_apiserver::ResourceSlice;

fn cases() -> Vec<(&'static str, DraDevice)> {
    let taint = |key: &str, value: &str| DeviceTaint {
        key: key.into(),
        value: value.into(),
        effect: TaintEffect::NoExecute,
    };
    let mut crowded = DraDevice::new("crowded");
    for index in 0..33 {
        crowded = crowded.with_attribute(format!("a{index}"), AttributeValue::Int(index));
    }
    let mut full = DraDevice::new("full");
    for index in 0..32 {
        full = full.with_attribute(format!("a{index}"), AttributeValue::Int(index));
    }
    let mut many_taints = DraDevice::new("many-taints");
    for index in 0..17 {
        many_taints = many_taints.with_taint(taint(&format!("example.com/t{index}"), ""));
    }
    vec![
        ("plain", DraDevice::new("gpu0")),
        ("full", full),
        ("crowded", crowded),
        ("bad name", DraDevice::new("GPU0")),
        ("long name", DraDevice::new("a".repeat(64))),
        (
            "bad key",
            DraDevice::new("gpu0").with_attribute("1st", AttributeValue::Int(1)),
        ),
        (
            "bad domain",
            DraDevice::new("gpu0").with_attribute("Ex_ample/x", AttributeValue::Int(1)),
        ),
        (
            "long string",
            DraDevice::new("gpu0").with_attribute("s", AttributeValue::String("s".repeat(65))),
        ),
        (
            "bad version",
            DraDevice::new("gpu0").with_attribute("v", AttributeValue::Version("1.2".into())),
        ),
        (
            "good version",
            DraDevice::new("gpu0")
                .with_attribute("v", AttributeValue::Version("1.2.3-rc.1+b.7".into())),
        ),
        (
            "numa",
            DraDevice::new("gpu0")
                .with_attribute("resource.kubernetes.io/numaNode", AttributeValue::Int(0)),
        ),
        ("many taints", many_taints),
        (
            "bad taint key",
            DraDevice::new("gpu0").with_taint(taint("-bad", "")),
        ),
        (
            "bad taint value",
            DraDevice::new("gpu0").with_taint(taint("example.com/t", "a b")),
        ),
        (
            "good taint",
            DraDevice::new("gpu0").with_taint(taint("example.com/t", "v_1.0")),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_flags_exactly_what_the_server_rejects() {
    let cluster = Cluster::start().await;
    let api: Api<ResourceSlice> = Api::all(cluster.client.clone());
    for (case, device) in cases() {
        let problems = validate(DRIVER, std::slice::from_ref(&device));
        let spec = plan_slices(&target(), std::slice::from_ref(&device), 1).remove(0);
        let slice = ResourceSlice {
            metadata: ObjectMeta {
                generate_name: Some("check-".into()),
                ..ObjectMeta::default()
            },
            spec,
        };
        let answer = within(case, api.create(&PostParams::default(), &slice)).await;
        match (problems.first(), answer) {
            (None, Ok(_)) => {}
            (Some(problem), Err(kube::Error::Api(status))) => {
                assert_eq!(status.code, 422, "{case}: {status:?}");
                let field = problem.field.split(['[', '.']).next().unwrap();
                assert!(
                    status.message.contains(field),
                    "{case}: we say {problem}, the server says {}",
                    status.message
                );
            }
            (_, Err(error)) => {
                panic!("{case}: the server refused with {error} (validate: {problems:?})")
            }
            (Some(problem), Ok(_)) => {
                panic!("{case}: validate flags {problem}, the server accepted it")
            }
        }
    }
}
