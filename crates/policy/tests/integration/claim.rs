//! The `claim` import (WIT 0.1.1): a DRA claim set on the call context
//! reaches `allocate` and `pre-start`; without one the guest sees `none`;
//! guests built against 0.1.0 and 0.1.1 load beside it. `claim.devices`
//! (0.1.2) is tested in `dra_hooks.rs`.

use std::sync::Arc;

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{CallErrorKind, ClaimInfo, ContainerResponse, Hook, WIT_VERSION};

fn claim(configs: &[&str]) -> Arc<ClaimInfo> {
    Arc::new(ClaimInfo {
        namespace: "team-a".into(),
        name: "train-gpus".into(),
        uid: "4f1c6a52-0d3e-4a59-9a35-0f6b1d7c2e11".into(),
        requests: vec!["gpu".into(), "nic".into()],
        configs: configs.iter().map(|c| c.to_string()).collect(),
        devices: Vec::new(),
    })
}

fn env<'a>(response: &'a ContainerResponse, key: &str) -> Option<&'a str> {
    response
        .envs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_host_implements_wit_0_1_3() {
    assert_eq!(WIT_VERSION, "0.1.3");
}

#[test]
fn allocate_sees_the_claim_and_its_configs_in_order() {
    let guest = load(artifacts::CLAIM_ECHO);
    assert_eq!(guest.hooks(), [Hook::Allocate, Hook::PreStart]);
    let devices = vec![device_ref("gpu0", 0, &[])];
    let configs = [
        r#"{"mode":"exclusive"}"#,
        r#"{"sharing":{"strategy":"TimeSlicing"}}"#,
    ];
    let context = ctx(&[]).with_claim(claim(&configs));
    let response = guest
        .allocate(&context, &devices, &ContainerResponse::default())
        .unwrap();
    assert_eq!(
        env(&response, "WDP_CLAIM"),
        Some("team-a/train-gpus/4f1c6a52-0d3e-4a59-9a35-0f6b1d7c2e11")
    );
    assert_eq!(env(&response, "WDP_CLAIM_REQUESTS"), Some("gpu,nic"));
    assert_eq!(env(&response, "WDP_CLAIM_CONFIGS"), Some("2"));
    assert_eq!(env(&response, "WDP_CLAIM_CONFIG_0"), Some(configs[0]));
    assert_eq!(env(&response, "WDP_CLAIM_CONFIG_1"), Some(configs[1]));
}

#[test]
fn without_a_claim_the_guest_sees_none() {
    let guest = load(artifacts::CLAIM_ECHO);
    let devices = vec![device_ref("gpu0", 0, &[])];
    let response = guest
        .allocate(&ctx(&[]), &devices, &ContainerResponse::default())
        .unwrap();
    assert_eq!(env(&response, "WDP_CLAIM"), Some("none"));
    assert_eq!(env(&response, "WDP_CLAIM_CONFIGS"), None);
    guest.pre_start(&ctx(&[]), &devices).unwrap();
}

#[test]
fn pre_start_reads_the_claim_config() {
    let guest = load(artifacts::CLAIM_ECHO);
    let devices = vec![device_ref("gpu0", 0, &[])];
    guest
        .pre_start(&ctx(&[]).with_claim(claim(&[r#"{"mode":"ok"}"#])), &devices)
        .unwrap();
    let refusing = ctx(&[]).with_claim(claim(&[r#"{"mode":"refuse-pre-start"}"#]));
    let error = guest.pre_start(&refusing, &devices).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    let message = error.to_string();
    assert!(
        message.contains("refused by the claim's configuration"),
        "{message}"
    );
    assert!(message.contains("claim_echo.wasm"), "{message}");
}

#[test]
fn a_guest_of_wit_0_1_0_still_loads_and_answers() {
    let guest = load(artifacts::COMPAT_OLDER_PATCH);
    assert_eq!(guest.hooks(), [Hook::Health]);
    let facts = wdp_policy::DeviceFacts {
        device: wdp_policy::Device {
            id: "d".into(),
            candidates: vec![],
            numa_nodes: vec![],
            attributes: vec![],
            replicas: 0,
        },
        candidates: vec![],
    };
    // A claim on the context is invisible to a guest that does not import it.
    let context = ctx(&[("note", "old but fine")]).with_claim(claim(&[]));
    let verdicts = guest.check_health(&context, &[facts]).unwrap();
    assert_eq!(verdicts[0].reason, "old but fine");
}

#[test]
fn a_guest_of_wit_0_1_1_still_loads_and_sees_the_claim() {
    // Its `claim` import is the 0.1.1 one, without `devices`.
    let guest = load(artifacts::COMPAT_PREVIOUS_PATCH);
    assert_eq!(guest.hooks(), [Hook::Allocate]);
    let devices = vec![device_ref("gpu0", 0, &[])];
    let response = guest
        .allocate(
            &ctx(&[]).with_claim(claim(&[])),
            &devices,
            &ContainerResponse::default(),
        )
        .unwrap();
    assert_eq!(env(&response, "WDP_CLAIM"), Some("team-a/train-gpus"));
    let response = guest
        .allocate(&ctx(&[]), &devices, &ContainerResponse::default())
        .unwrap();
    assert_eq!(env(&response, "WDP_CLAIM"), Some("none"));
}
