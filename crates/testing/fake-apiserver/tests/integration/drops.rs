//! DRA feature gates turned off, through kube-rs: their fields are silently dropped from
//! created slices and from updates of slices that do not use them yet, before validation; a
//! stored slice that already uses them keeps them on update, as on the real server.

use std::collections::BTreeMap;

use crate::common::{counters, numbered, slice, start};
use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CounterSet, DeviceCapacity, DeviceCounterConsumption, DeviceTaint,
    ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, PostParams};

/// A 1.34 slice with a counter set and a device consuming from it.
fn partitioned(name: &str) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &["gpu-0-half"]);
    s.spec.shared_counters = Some(vec![CounterSet {
        name: "gpu-0".into(),
        counters: counters(numbered("memory", 1), "40Gi"),
    }]);
    s.spec.devices.as_mut().unwrap()[0].consumes_counters = Some(vec![DeviceCounterConsumption {
        counter_set: "gpu-0".into(),
        counters: counters(numbered("memory", 1), "20Gi"),
    }]);
    s
}

/// A device with a request policy on its memory, shareable when `shareable`.
fn consumable(name: &str, shareable: bool) -> ResourceSlice {
    let mut s = slice(name, "node-1", "gpu.example.com", &["gpu"]);
    let device = &mut s.spec.devices.as_mut().unwrap()[0];
    device.allow_multiple_allocations = shareable.then_some(true);
    device.capacity = Some(BTreeMap::from([(
        "memory".to_string(),
        DeviceCapacity {
            value: Quantity("40Gi".into()),
            request_policy: Some(CapacityRequestPolicy {
                default: Some(Quantity("1Gi".into())),
                valid_range: None,
                valid_values: None,
            }),
        },
    )]));
    s
}

#[tokio::test]
async fn partitions_dropped_strips_counters_unless_the_stored_slice_has_them() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let post = PostParams::default();
    let kept = api.create(&post, &partitioned("kept")).await.unwrap();
    assert!(kept.spec.shared_counters.is_some(), "the gate is on");
    let plain = api
        .create(
            &post,
            &slice("plain", "node-1", "gpu.example.com", &["gpu-0-half"]),
        )
        .await
        .unwrap();

    h.server.set_partitions_dropped(true);
    let created = api.create(&post, &partitioned("dropped")).await.unwrap();
    assert_eq!(created.spec.shared_counters, None);
    assert_eq!(
        created.spec.devices.as_ref().unwrap()[0].consumes_counters,
        None
    );
    let stored = h
        .server
        .slices()
        .into_iter()
        .find(|s| s.metadata.name.as_deref() == Some("dropped"));
    assert_eq!(stored.unwrap().spec, created.spec, "stored as answered");

    // An update of a slice that already has counters keeps them (and may change them).
    let mut update = kept.clone();
    update.spec.pool.generation += 1;
    update.spec.shared_counters.as_mut().unwrap()[0].counters =
        counters(numbered("memory", 2), "40Gi");
    let updated = api.replace("kept", &post, &update).await.unwrap();
    assert_eq!(updated.spec.shared_counters, update.spec.shared_counters);
    assert!(
        updated.spec.devices.as_ref().unwrap()[0]
            .consumes_counters
            .is_some()
    );

    // An update that adds counters to a slice without them loses them.
    let mut adding = partitioned("plain");
    adding.metadata = plain.metadata.clone();
    let updated = api.replace("plain", &post, &adding).await.unwrap();
    assert_eq!(updated.spec.shared_counters, None);
    assert_eq!(
        updated.spec.devices.as_ref().unwrap()[0].consumes_counters,
        None
    );
    assert_eq!(
        updated.metadata.resource_version, plain.metadata.resource_version,
        "a no-op"
    );

    h.server.set_partitions_dropped(false);
    let created = api.create(&post, &partitioned("again")).await.unwrap();
    assert!(
        created.spec.shared_counters.is_some(),
        "the gate is on again"
    );
}

#[tokio::test]
async fn consumable_capacity_dropped_strips_policies_before_validation() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let post = PostParams::default();
    let kept = api.create(&post, &consumable("kept", true)).await.unwrap();

    h.server.set_consumable_capacity_dropped(true);
    let created = api
        .create(&post, &consumable("dropped", true))
        .await
        .unwrap();
    let device = &created.spec.devices.as_ref().unwrap()[0];
    assert_eq!(device.allow_multiple_allocations, None);
    let memory = &device.capacity.as_ref().unwrap()["memory"];
    assert_eq!(
        (memory.value.0.as_str(), &memory.request_policy),
        ("40Gi", &None)
    );
    // A policy the gate would refuse (no allowMultipleAllocations) is dropped, so accepted.
    let created = api
        .create(&post, &consumable("unshared", false))
        .await
        .unwrap();
    assert_eq!(
        created.spec.devices.as_ref().unwrap()[0]
            .capacity
            .as_ref()
            .unwrap()["memory"]
            .request_policy,
        None
    );

    let mut update = kept.clone();
    update.spec.pool.generation += 1;
    let updated = api.replace("kept", &post, &update).await.unwrap();
    let device = &updated.spec.devices.as_ref().unwrap()[0];
    assert_eq!(
        device.allow_multiple_allocations,
        Some(true),
        "in use: kept"
    );
    assert!(
        device.capacity.as_ref().unwrap()["memory"]
            .request_policy
            .is_some()
    );

    h.server.set_consumable_capacity_dropped(false);
    let status = crate::common::api_error(api.create(&post, &consumable("refused", false)).await);
    assert!(
        status
            .message
            .contains("allowMultipleAllocations must be true"),
        "with the gate on the policy is validated: {}",
        status.message
    );
}

#[tokio::test]
async fn taints_dropped_keeps_the_taints_of_a_tainted_slice_on_update() {
    let h = start().await;
    let api: Api<ResourceSlice> = Api::all(h.client.clone());
    let post = PostParams::default();
    let mut tainted = slice("a", "node-1", "gpu.example.com", &["x"]);
    tainted.spec.devices.as_mut().unwrap()[0].taints = Some(vec![DeviceTaint {
        key: "example.com/unhealthy".into(),
        value: None,
        effect: "NoSchedule".into(),
        time_added: None,
    }]);
    let created = api.create(&post, &tainted).await.unwrap();
    h.server.set_taints_dropped(true);
    let mut update = created.clone();
    update.spec.pool.generation += 1;
    let updated = api.replace("a", &post, &update).await.unwrap();
    assert_eq!(
        updated.spec.devices.as_ref().unwrap()[0].taints,
        created.spec.devices.as_ref().unwrap()[0].taints
    );
}
