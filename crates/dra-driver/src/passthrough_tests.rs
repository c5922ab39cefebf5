use k8s_openapi::api::resource::v1::ResourceClaim;
use serde_json::json;

use super::claims::{condition_statuses, decided, waiting_results};
use super::*;

fn claim_with(results: serde_json::Value, devices: serde_json::Value) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "vm", "namespace": "default", "uid": "uid-vm"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": results}},
            "devices": devices,
        }
    }))
    .unwrap()
}

fn waiting(device: &str) -> serde_json::Value {
    json!({
        "request": "gpu", "driver": "vfio.example.com", "pool": "node-a", "device": device,
        "bindingConditions": [BOUND_CONDITION],
        "bindingFailureConditions": [BIND_FAILED_CONDITION],
    })
}

#[test]
fn only_this_drivers_results_on_this_pool_that_wait_on_the_condition_are_bound() {
    let claim = claim_with(
        json!([
            waiting("gpu-a"),
            {"request": "gpu", "driver": "vfio.example.com", "pool": "node-a", "device": "gpu-b"},
            {"request": "gpu", "driver": "vfio.example.com", "pool": "node-b", "device": "gpu-c",
             "bindingConditions": [BOUND_CONDITION], "bindingFailureConditions": [BIND_FAILED_CONDITION]},
            {"request": "gpu", "driver": "other.example.com", "pool": "node-a", "device": "gpu-d",
             "bindingConditions": [BOUND_CONDITION], "bindingFailureConditions": [BIND_FAILED_CONDITION]},
        ]),
        json!([]),
    );
    let devices: Vec<&str> = waiting_results(&claim, "vfio.example.com", "node-a")
        .iter()
        .map(|r| r.device.as_str())
        .collect();
    assert_eq!(devices, ["gpu-a"]);
}

#[test]
fn a_result_is_decided_once_either_condition_is_true() {
    let status = |type_: &str, status: &str| {
        json!([{"driver": "vfio.example.com", "pool": "node-a", "device": "gpu-a",
                "conditions": [{"type": type_, "status": status, "reason": "R", "message": "",
                                "lastTransitionTime": "2026-12-07T00:00:00Z"}]}])
    };
    for (devices, expected) in [
        (json!([]), false),
        (status(BOUND_CONDITION, "False"), false),
        (status(BOUND_CONDITION, "True"), true),
        (status(BIND_FAILED_CONDITION, "True"), true),
    ] {
        let claim = claim_with(json!([waiting("gpu-a")]), devices.clone());
        let results = waiting_results(&claim, "vfio.example.com", "node-a");
        assert_eq!(decided(&claim, results[0]), expected, "{devices}");
    }
}

#[test]
fn a_failure_sets_the_failure_condition_with_its_reason_and_a_bind_the_condition() {
    let claim = claim_with(json!([waiting("gpu-a")]), json!([]));
    let results = waiting_results(&claim, "vfio.example.com", "node-a");

    let ok = condition_statuses(&results, &Ok("IOMMU group(s) 13 bound in 5 ms".to_owned()));
    let conditions = ok[0].conditions.as_ref().unwrap();
    assert_eq!(
        (
            conditions.len(),
            conditions[0].type_.as_str(),
            conditions[0].status.as_str()
        ),
        (1, BOUND_CONDITION, "True")
    );
    assert_eq!(
        (
            ok[0].driver.as_str(),
            ok[0].pool.as_str(),
            ok[0].device.as_str()
        ),
        ("vfio.example.com", "node-a", "gpu-a")
    );

    let refused = condition_statuses(
        &results,
        &Err(BindFailure::Guest(
            "guest vfio-guard: the group holds a disk".to_owned(),
        )),
    );
    let conditions = refused[0].conditions.as_ref().unwrap();
    let failed = conditions
        .iter()
        .find(|c| c.type_ == BIND_FAILED_CONDITION)
        .unwrap();
    assert_eq!(failed.status, "True");
    assert_eq!(failed.reason, "RefusedByPolicy");
    assert!(
        failed.message.contains("holds a disk"),
        "{}",
        failed.message
    );
    let bound = conditions
        .iter()
        .find(|c| c.type_ == BOUND_CONDITION)
        .unwrap();
    assert_eq!(bound.status, "False");
}

#[test]
fn only_a_resource_with_passthrough_publishes_binding_conditions() {
    let text = "version = 1\nresource = \"example.com/vfio\"\napi = \"dra\"\ndriver = \"vfio.example.com\"\n[[pci]]\nvendor = \"10de\"\n";
    let parse = |text: &str| {
        wdp_config::parse_resource(
            Path::new("/cfg"),
            Path::new("/cfg/vfio.toml"),
            text,
            &wdp_config::HostSettings::default(),
        )
        .unwrap()
    };
    assert_eq!(binding_conditions(&parse(text)), None);
    let with = parse(&format!(
        "{text}[passthrough]\nbind-driver = \"vfio-pci\"\n"
    ));
    assert_eq!(
        binding_conditions(&with),
        Some(BindingConditions {
            ready: vec![BOUND_CONDITION.to_owned()],
            failed: vec![BIND_FAILED_CONDITION.to_owned()],
        })
    );
}
