//! Tests of the wire mapping: sizes computed without building a message
//! equal the message's, and each refusal keeps its gRPC code, message and
//! blame.

use std::collections::BTreeMap;
use std::time::Duration;

use prost::Message;
use wdp_policy::Hook;
use wdp_policy::types::{self as guest, Device, Verdict};
use wdp_resource::GuestFailure;

use super::*;

#[test]
fn list_encoded_length_is_that_of_the_message() {
    let devices: Vec<Device> = (0..300)
        .map(|i| Device {
            id: format!("dev{i}"),
            numa_nodes: if i % 3 == 0 {
                vec![0, i64::from(i), -1]
            } else {
                vec![]
            },
            ..Device::default()
        })
        .collect();
    let verdicts = BTreeMap::from([(
        "dev7".to_owned(),
        Verdict {
            id: "dev7".into(),
            healthy: false,
            reason: "hot".into(),
        },
    )]);
    let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
    assert_eq!(set.list_encoded_len(), device_list(&set).encoded_len());
    assert_eq!(DeviceSet::default().list_encoded_len(), 0);
    assert!(
        device_list(&set)
            .devices
            .iter()
            .all(|d| (d.health == "Unhealthy") == (d.id == "dev7"))
    );
}

#[test]
fn grant_encoded_length_is_that_of_the_message() {
    let grants = [
        ContainerGrant::default(),
        ContainerGrant::from(guest::ContainerResponse {
            envs: vec![
                ("A".into(), "1".into()),
                ("EMPTY".into(), String::new()),
                ("A".into(), "twice".into()),
                (String::new(), "no key".into()),
            ],
            mounts: vec![
                guest::Mount {
                    container_path: "/in".into(),
                    host_path: "/out".into(),
                    read_only: true,
                },
                guest::Mount::default(),
            ],
            devices: vec![
                guest::DeviceSpec {
                    container_path: "/dev/a".into(),
                    host_path: "/dev/b".into(),
                    permissions: "rw".into(),
                },
                guest::DeviceSpec::default(),
            ],
            annotations: vec![("k".into(), "v".repeat(300))],
            cdi_devices: vec!["example.com/gpu=0".into(), String::new()],
        }),
    ];
    for grant in grants {
        let expected = kubelet_response(grant.clone()).encoded_len();
        assert_eq!(grant.encoded_len(), expected, "{grant:?}");
    }
}

#[test]
fn a_grant_keeps_the_last_value_of_a_key_given_twice() {
    let grant = ContainerGrant::from(guest::ContainerResponse {
        envs: vec![("A".into(), "1".into()), ("A".into(), "2".into())],
        ..guest::ContainerResponse::default()
    });
    assert_eq!(kubelet_response(grant).envs["A"], "2");
}

fn invalid() -> GuestFailure {
    GuestFailure::Invalid {
        guest: "packing".into(),
        hook: Hook::Allocate,
        problem: "too big".into(),
    }
}

#[test]
fn refusals_keep_their_codes_and_messages() {
    let status = kubelet_status(AdmissionError::InvalidRequest(
        "unknown device \"x\"".into(),
    ));
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(status.message(), "unknown device \"x\"");
    assert_eq!(blamed_guest(&status), None);

    let status = kubelet_status(AdmissionError::AnswerTooLarge("big".into()));
    assert_eq!(status.code(), tonic::Code::ResourceExhausted);

    let status = kubelet_status(AdmissionError::NodeGone {
        device: "gpu0".into(),
        node: "/dev/gpu0".into(),
    });
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status.message(), "device \"gpu0\": node /dev/gpu0 is gone");

    let status = kubelet_status(AdmissionError::GuestFailed(invalid()));
    assert_eq!(status.code(), tonic::Code::Internal);
    assert_eq!(status.message(), invalid().to_string());
    assert_eq!(blamed_guest(&status), Some(("packing", "allocate")));

    let status = kubelet_status(AdmissionError::GuestFailed(GuestFailure::Backstop {
        guest: "slow".into(),
        hook: Hook::Allocate,
        waited: Duration::from_secs(3),
    }));
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
    assert_eq!(blamed_guest(&status), Some(("slow", "allocate")));

    let status = kubelet_status(AdmissionError::PreStartRefused(invalid()));
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        status.message(),
        format!("pre-start refused: {}", invalid())
    );

    let status = kubelet_status(AdmissionError::DraAction {
        hook: Hook::DraPrepare,
        failure: invalid(),
    });
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(status.message(), format!("dra-prepare: {}", invalid()));
}
