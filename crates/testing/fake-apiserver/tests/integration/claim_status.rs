//! The ResourceClaim `status` subresource through kube-rs: what a DRA driver writes after
//! preparing devices. A write replaces only the status, honours the resourceVersion (409 on a
//! stale one), and is validated: device statuses must match allocation results, with the
//! condition, data and network-data limits of the real server.

use crate::common::{api_error, assert_invalid, start};
use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, AllocationResult, DeviceAllocationResult, DeviceClaim, DeviceRequest,
    DeviceRequestAllocationResult, ExactDeviceRequest, NetworkDeviceData, ResourceClaim,
    ResourceClaimConsumerReference, ResourceClaimSpec, ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, Patch, PatchParams, PostParams};

const DRIVER: &str = "gpu.example.com";
const SHARE: &str = "0b7c9a2e-4a55-4a8e-9d39-6c1b8e0f1a2b";

fn result(device: &str, share: Option<&str>) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: "gpu".into(),
        driver: DRIVER.into(),
        pool: "node-1".into(),
        device: device.into(),
        share_id: share.map(Into::into),
        ..Default::default()
    }
}

fn allocation(results: Vec<DeviceRequestAllocationResult>) -> AllocationResult {
    AllocationResult {
        devices: Some(DeviceAllocationResult {
            results: Some(results),
            config: None,
        }),
        ..Default::default()
    }
}

/// A claim in `team-a` requesting `gpu`, allocated `gpu-0` and a share of `gpu-1`.
fn allocated_claim(name: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            namespace: Some("team-a".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "gpu".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu.example.com".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(allocation(vec![
                result("gpu-0", None),
                result("gpu-1", Some(SHARE)),
            ])),
            ..Default::default()
        }),
    }
}

fn ready() -> Condition {
    Condition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: "Prepared".into(),
        message: "CDI spec written".into(),
        last_transition_time: Time("2026-01-01T00:00:00Z".parse().unwrap()),
        observed_generation: None,
    }
}

fn device_status(device: &str, share: Option<&str>) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: DRIVER.into(),
        pool: "node-1".into(),
        device: device.into(),
        share_id: share.map(Into::into),
        conditions: Some(vec![ready()]),
        data: Some(RawExtension(
            serde_json::json!({"cdi": "gpu.example.com/gpu=gpu-0"}),
        )),
        network_data: Some(NetworkDeviceData {
            interface_name: Some("net1".into()),
            hardware_address: Some("02:00:00:00:00:01".into()),
            ips: Some(vec!["10.9.8.7/24".into(), "2001:db8::1/64".into()]),
        }),
    }
}

fn with_devices(claim: &ResourceClaim, devices: Vec<AllocatedDeviceStatus>) -> ResourceClaim {
    let mut claim = claim.clone();
    claim.status.as_mut().unwrap().devices = Some(devices);
    claim
}

#[tokio::test]
async fn a_status_write_changes_only_the_status_and_honours_the_resource_version() {
    let h = start().await;
    let api: Api<ResourceClaim> = Api::namespaced(h.client.clone(), "team-a");
    let stored = h.server.put_claim(allocated_claim("c"));
    assert_eq!(api.get_status("c").await.unwrap(), stored);

    // The body also carries a changed spec and labels: only the status is taken.
    let mut request = with_devices(
        &stored,
        vec![
            device_status("gpu-0", None),
            device_status("gpu-1", Some(SHARE)),
        ],
    );
    request.spec.devices = None;
    request.metadata.labels = Some([("x".to_string(), "y".to_string())].into());
    let written = api
        .replace_status("c", &PostParams::default(), &request)
        .await
        .expect("statuses of both allocated devices");
    assert_eq!(written.spec, stored.spec, "spec unchanged");
    assert_eq!(written.metadata.labels, None, "metadata unchanged");
    assert_eq!(written.metadata.generation, stored.metadata.generation);
    assert_ne!(
        written.metadata.resource_version,
        stored.metadata.resource_version
    );
    assert_eq!(written.status, request.status);
    assert_eq!(h.server.claim("team-a", "c"), Some(written.clone()));
    assert_eq!(h.server.claim("team-a", "missing"), None);

    // The same write again, from the now stale version: 409, nothing written.
    let status = api_error(
        api.replace_status("c", &PostParams::default(), &request)
            .await,
    );
    assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"));
    assert!(
        status.message.contains(
            "Operation cannot be fulfilled on resourceclaims.resource.k8s.io \"c\": the object has been modified"
        ),
        "{}",
        status.message
    );
    assert_eq!(h.server.claim("team-a", "c"), Some(written.clone()));

    // Without a resourceVersion the write is unconditional; an unchanged status is a no-op.
    let mut unconditional = written.clone();
    unconditional.metadata.resource_version = None;
    let again = api
        .replace_status("c", &PostParams::default(), &unconditional)
        .await
        .unwrap();
    assert_eq!(again, written, "a no-op keeps the resourceVersion");

    // A merge patch that pins a stale version conflicts; an unpinned one applies.
    let pinned = serde_json::json!({
        "metadata": {"resourceVersion": stored.metadata.resource_version},
        "status": {"devices": [device_status("gpu-0", None)]},
    });
    let status = api_error(
        api.patch_status("c", &PatchParams::default(), &Patch::Merge(&pinned))
            .await,
    );
    assert_eq!(status.code, 409, "{}", status.message);
    let patch = serde_json::json!({"status": {"devices": [device_status("gpu-0", None)]}});
    let patched = api
        .patch_status("c", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_eq!(
        patched.status.as_ref().unwrap().devices,
        Some(vec![device_status("gpu-0", None)])
    );

    let stats = h.server.stats();
    assert_eq!(stats.claim_status_writes, 3, "{stats:?}");
    assert_eq!(stats.claim_status_rejected.len(), 2, "{stats:?}");
    assert_eq!(stats.claim_status_rejected[0].name, "team-a/c");
    assert!(
        stats.rejected.is_empty(),
        "slice rejections are counted apart"
    );
}

type Break = fn(&mut AllocatedDeviceStatus);

const CASES: &[(&str, Break, &str, &str)] = &[
    (
        "a device that is not allocated",
        |d| d.device = "gpu-9".into(),
        "status.devices[0]",
        "Invalid value: gpu.example.com/node-1/gpu-9: must be an allocated device in the claim",
    ),
    (
        "a share of a device allocated whole",
        |d| d.share_id = Some(SHARE.into()),
        "status.devices[0]",
        "must be an allocated device in the claim",
    ),
    (
        "a share ID that is not a UUID",
        |d| d.share_id = Some("share-1".into()),
        "status.devices[0].shareID",
        "error validating uid",
    ),
    (
        "a device name that is not a DNS label",
        |d| d.device = "GPU_0".into(),
        "status.devices[0].device",
        "a lowercase RFC 1123 label",
    ),
    (
        "9 conditions",
        |d| {
            d.conditions = Some(
                (0..9)
                    .map(|i| Condition {
                        type_: format!("example.com/c{i}"),
                        ..ready()
                    })
                    .collect(),
            )
        },
        "status.devices[0].conditions",
        "Too many: 9: must have at most 8 items",
    ),
    (
        "a condition status that is not True, False or Unknown",
        |d| d.conditions.as_mut().unwrap()[0].status = "Yes".into(),
        "status.devices[0].conditions[0].status",
        "Unsupported value: \"Yes\"",
    ),
    (
        "a condition reason of the wrong syntax",
        |d| d.conditions.as_mut().unwrap()[0].reason = "not ready".into(),
        "status.devices[0].conditions[0].reason",
        "a condition reason must start with alphabetic character",
    ),
    (
        "a condition without a reason",
        |d| d.conditions.as_mut().unwrap()[0].reason = String::new(),
        "status.devices[0].conditions[0].reason",
        "Required value: must be set",
    ),
    (
        "a condition type that is not a qualified name",
        |d| d.conditions.as_mut().unwrap()[0].type_ = "Ready now".into(),
        "status.devices[0].conditions[0].type",
        "name part must consist of alphanumeric characters",
    ),
    (
        "a condition type twice",
        |d| d.conditions = Some(vec![ready(), ready()]),
        "status.devices[0].conditions[1].type",
        "Duplicate value: \"Ready\"",
    ),
    (
        "data over 10 KiB",
        |d| {
            d.data = Some(RawExtension(
                serde_json::json!({"blob": "x".repeat(10 * 1024)}),
            ))
        },
        "status.devices[0].data",
        "Too long: may not be more than 10240 bytes",
    ),
    (
        "data that is not an object",
        |d| d.data = Some(RawExtension(serde_json::json!(["a"]))),
        "status.devices[0].data",
        "must be a valid JSON object",
    ),
    (
        "an interface name over 256 bytes",
        |d| d.network_data.as_mut().unwrap().interface_name = Some("i".repeat(257)),
        "status.devices[0].networkData.interfaceName",
        "Too long: may not be more than 256 bytes",
    ),
    (
        "a hardware address over 128 bytes",
        |d| d.network_data.as_mut().unwrap().hardware_address = Some("a".repeat(129)),
        "status.devices[0].networkData.hardwareAddress",
        "Too long: may not be more than 128 bytes",
    ),
    (
        "17 IPs",
        |d| {
            d.network_data.as_mut().unwrap().ips =
                Some((0..17).map(|i| format!("10.0.0.{i}/24")).collect())
        },
        "status.devices[0].networkData.ips",
        "Too many: 17: must have at most 16 items",
    ),
    (
        "an IP without a prefix",
        |d| d.network_data.as_mut().unwrap().ips = Some(vec!["10.9.8.7".into()]),
        "status.devices[0].networkData.ips[0]",
        "must be a valid address in CIDR form",
    ),
    (
        "an IP not in canonical form",
        |d| d.network_data.as_mut().unwrap().ips = Some(vec!["2001:DB8::1/64".into()]),
        "status.devices[0].networkData.ips[0]",
        "must be in canonical form (\"2001:db8::1/64\")",
    ),
    (
        "an IP twice",
        |d| {
            d.network_data.as_mut().unwrap().ips =
                Some(vec!["10.9.8.7/24".into(), "10.9.8.7/24".into()])
        },
        "status.devices[0].networkData.ips[1]",
        "Duplicate value: \"10.9.8.7/24\"",
    ),
];

#[tokio::test]
async fn device_statuses_are_validated_against_the_allocation() {
    let h = start().await;
    let api: Api<ResourceClaim> = Api::namespaced(h.client.clone(), "team-a");
    let stored = h.server.put_claim(allocated_claim("c"));
    for (what, mutate, path, words) in CASES {
        let mut entry = device_status("gpu-0", None);
        mutate(&mut entry);
        let request = with_devices(&stored, vec![entry]);
        assert_invalid(
            api.replace_status("c", &PostParams::default(), &request)
                .await,
            path,
            words,
            what,
        );
    }
    let twice = with_devices(
        &stored,
        vec![device_status("gpu-0", None), device_status("gpu-0", None)],
    );
    assert_invalid(
        api.replace_status("c", &PostParams::default(), &twice)
            .await,
        "status.devices[1]",
        "Duplicate value: \"gpu.example.com/node-1/gpu-0\"",
        "a device twice",
    );
    assert_eq!(
        h.server.claim("team-a", "c"),
        Some(stored),
        "nothing written"
    );
    assert_eq!(
        h.server.stats().claim_status_rejected.len(),
        CASES.len() + 1
    );
}

#[tokio::test]
async fn allocation_rules_and_deallocation() {
    let h = start().await;
    let api: Api<ResourceClaim> = Api::namespaced(h.client.clone(), "team-a");
    let post = PostParams::default();

    // A first allocation must name requests of the claim.
    let mut pending = allocated_claim("pending");
    pending.status = None;
    let pending = h.server.put_claim(pending);
    let mut allocating = pending.clone();
    allocating.status = Some(ResourceClaimStatus {
        allocation: Some(allocation(vec![DeviceRequestAllocationResult {
            request: "tpu".into(),
            ..result("gpu-0", None)
        }])),
        ..Default::default()
    });
    assert_invalid(
        api.replace_status("pending", &post, &allocating).await,
        "status.allocation.devices.results[0].request",
        "must be the name of a request in the claim",
        "an unknown request",
    );
    // reservedFor needs an allocation.
    let mut reserving = pending.clone();
    reserving.status = Some(ResourceClaimStatus {
        reserved_for: Some(vec![ResourceClaimConsumerReference {
            resource: "pods".into(),
            name: "p".into(),
            uid: "u-1".into(),
            api_group: None,
        }]),
        ..Default::default()
    });
    assert_invalid(
        api.replace_status("pending", &post, &reserving).await,
        "status.reservedFor",
        "Forbidden: may not be specified when `allocated` is not set",
        "reservedFor without allocation",
    );

    // Once set, the allocation is immutable.
    let stored = h.server.put_claim(allocated_claim("c"));
    let mut moved = with_devices(&stored, vec![]);
    moved.status.as_mut().unwrap().allocation = Some(allocation(vec![result("gpu-2", None)]));
    assert_invalid(
        api.replace_status("c", &post, &moved).await,
        "status.allocation",
        "field is immutable",
        "a changed allocation",
    );

    // Deallocating drops the statuses of the devices no longer allocated.
    let written = api
        .replace_status(
            "c",
            &post,
            &with_devices(&stored, vec![device_status("gpu-0", None)]),
        )
        .await
        .unwrap();
    let mut deallocated = written.clone();
    deallocated.status.as_mut().unwrap().allocation = None;
    let answer = api.replace_status("c", &post, &deallocated).await.unwrap();
    assert_eq!(
        answer.status,
        Some(ResourceClaimStatus::default()),
        "the device status went with the allocation"
    );
}
