//! Partitionable devices and consumable capacity against the fake API
//! server: the slices a 1.34 and a 1.35 server get, a server upgraded under
//! the publisher, and servers whose feature gates drop the new fields.

use crate::common::*;
use wdp_dra_client::{
    Capacity, CapacityPolicy, CapacityRange, CounterSet, DraDevice, PoolContent, ServerVersion,
};
use wdp_fake_apiserver::ResourceSlice;

/// `gpus` GPUs, each with a counter set `gpu<g>-counters`, the whole GPU and
/// two halves consuming from it, and a NIC shared by several allocations.
fn pool(gpus: usize) -> PoolContent {
    let mut content = PoolContent::default();
    for g in 0..gpus {
        let set = format!("gpu{g}-counters");
        content
            .counter_sets
            .push(CounterSet::new(set.clone(), [("memory", "40Gi")]));
        content
            .devices
            .push(DraDevice::new(format!("gpu{g}")).consuming(set.clone(), [("memory", "40Gi")]));
        for half in 0..2 {
            content.devices.push(
                DraDevice::new(format!("gpu{g}-half{half}"))
                    .consuming(set.clone(), [("memory", "20Gi")])
                    .partition_of(format!("gpu{g}")),
            );
        }
    }
    content
        .devices
        .push(DraDevice::new("nic0").shared().with_capacity(
            "bandwidth",
            Capacity::new("100G").with_policy(CapacityPolicy {
                default: Some("1G".into()),
                valid_values: Vec::new(),
                valid_range: Some(CapacityRange {
                    min: "1G".into(),
                    max: Some("100G".into()),
                    step: Some("1G".into()),
                }),
            }),
        ));
    content
}

fn set_names(slices: &[ResourceSlice]) -> Vec<String> {
    let mut names: Vec<String> = slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
        .map(|set| set.name.clone())
        .collect();
    names.sort();
    names
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

fn pool_names(content: &PoolContent) -> Vec<String> {
    sorted(content.devices.iter().map(|d| d.name.clone()).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_34_server_gets_counter_sets_in_the_slice_of_their_consumers() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish_pool(pool(3));

    let published = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    assert_eq!(published.error, None);
    assert_eq!(published.problems, vec![]);
    assert_eq!(published.server_version, Some(ServerVersion::V1_34));
    assert_eq!(published.published.as_ref().unwrap().devices, 10);
    let slices = cluster.our_slices();
    assert_eq!(slices.len(), 1, "{slices:#?}");
    assert_eq!(
        set_names(&slices),
        vec!["gpu0-counters", "gpu1-counters", "gpu2-counters"]
    );
    assert_eq!(device_names(&slices), pool_names(&pool(3)));
    let nic = slices[0]
        .spec
        .devices
        .iter()
        .flatten()
        .find(|d| d.name == "nic0")
        .unwrap();
    assert_eq!(nic.allow_multiple_allocations, Some(true));

    // The same pool in another order: a pass, no write.
    let writes = cluster.writes();
    let mut reordered = pool(3);
    reordered.devices.reverse();
    reordered.counter_sets.reverse();
    publisher.publish_pool(reordered);
    status_where(&mut status, "a second pass", |s| {
        s.passes > published.passes
    })
    .await;
    assert_eq!(cluster.writes(), writes, "{:?}", cluster.server.stats());
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_35_server_gets_counter_sets_in_slices_of_their_own() {
    let cluster = Cluster::start().await;
    cluster.server.set_served_minor(35);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish_pool(pool(10));

    let published = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    assert_eq!(published.error, None);
    assert_eq!(published.problems, vec![]);
    assert_eq!(published.server_version, Some(ServerVersion::V1_35));
    let slices = cluster.our_slices();
    // 10 sets: 8 + 2 in two slices; 31 devices in a third.
    assert_eq!(slices.len(), 3, "{slices:#?}");
    let generation = published.published.unwrap().generation;
    assert!(complete_pool_at(&slices, generation), "{slices:#?}");
    for slice in &slices {
        assert!(
            slice.spec.devices.is_none() || slice.spec.shared_counters.is_none(),
            "devices and counter sets share a slice: {slice:#?}"
        );
    }
    assert_eq!(set_names(&slices).len(), 10);
    assert_eq!(device_names(&slices), pool_names(&pool(10)));
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_upgraded_to_1_35_gets_the_new_layout() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish_pool(pool(2));
    status_where(&mut status, "the 1.34 layout", |s| {
        s.published.is_some() && s.server_version == Some(ServerVersion::V1_34)
    })
    .await;

    // The 1.34 layout is invalid on 1.35; the publisher asks again.
    cluster.server.set_served_minor(35);
    publisher.publish_pool(pool(3));
    let upgraded = status_where(&mut status, "the 1.35 layout", |s| {
        s.server_version == Some(ServerVersion::V1_35)
            && s.error.is_none()
            && s.published.as_ref().is_some_and(|p| p.devices == 10)
    })
    .await;
    assert!(upgraded.failed_passes >= 1, "{upgraded:?}");
    let slices = cluster.our_slices();
    assert!(
        slices
            .iter()
            .all(|s| s.spec.devices.is_none() || s.spec.shared_counters.is_none()),
        "{slices:#?}"
    );
    assert_eq!(set_names(&slices).len(), 3);
    assert_eq!(device_names(&slices), pool_names(&pool(3)));
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dropping_counters_gets_whole_devices_only() {
    for minor in [34, 35] {
        let cluster = Cluster::start().await;
        cluster.server.set_served_minor(minor);
        cluster.server.set_partitions_dropped(true);
        let publisher = cluster.publisher(target());
        let mut status = publisher.status();
        publisher.publish_pool(pool(2));

        let settled = status_where(&mut status, "whole devices published", |s| {
            s.partitions_dropped && s.published.as_ref().is_some_and(|p| p.devices == 3)
        })
        .await;
        assert_eq!(settled.error, None);
        assert!(!settled.consumable_capacity_dropped);
        let slices = slices_where(&cluster.server, "whole devices only", |s| {
            device_names(s) == ["gpu0", "gpu1", "nic0"]
        })
        .await;
        assert!(set_names(&slices).is_empty(), "1.{minor}: {slices:#?}");
        for device in slices.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
            assert_eq!(device.consumes_counters, None, "1.{minor}: {device:?}");
        }

        // Settled: the same pool again writes nothing.
        let writes = cluster.writes();
        let passes = status.borrow().passes;
        publisher.publish_pool(pool(2));
        status_where(&mut status, "another pass", |s| s.passes > passes).await;
        assert_eq!(cluster.writes(), writes, "1.{minor}");
        publisher.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_dropping_sharing_gets_devices_without_it() {
    let cluster = Cluster::start().await;
    cluster.server.set_consumable_capacity_dropped(true);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish_pool(pool(1));

    let seen = status_where(&mut status, "sharing seen dropped", |s| {
        s.consumable_capacity_dropped && s.published.is_some()
    })
    .await;
    assert!(!seen.partitions_dropped);
    let slices = cluster.our_slices();
    assert_eq!(device_names(&slices), pool_names(&pool(1)));
    let nic = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| d.name == "nic0")
        .unwrap();
    assert_eq!(nic.allow_multiple_allocations, None);
    let bandwidth = &nic.capacity.as_ref().unwrap()["bandwidth"];
    assert_eq!(bandwidth.request_policy, None);

    let writes = cluster.writes();
    let passes = status.borrow().passes;
    publisher.publish_pool(pool(1));
    status_where(&mut status, "another pass", |s| s.passes > passes).await;
    assert_eq!(cluster.writes(), writes);
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_version_cannot_hold_is_left_out_and_named() {
    let cluster = Cluster::start().await;
    cluster.server.set_served_minor(35);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let mut content = pool(3);
    // Three consumptions: more than a 1.35 server allows.
    content.devices.push(
        DraDevice::new("greedy")
            .consuming("gpu0-counters", [("memory", "1Gi")])
            .consuming("gpu1-counters", [("memory", "1Gi")])
            .consuming("gpu2-counters", [("memory", "1Gi")]),
    );
    publisher.publish_pool(content);

    let published = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    assert_eq!(published.error, None);
    assert_eq!(published.problems.len(), 1, "{:?}", published.problems);
    assert_eq!(published.problems[0].device.as_deref(), Some("greedy"));
    assert_eq!(published.problems[0].field, "consumesCounters");
    assert_eq!(device_names(&cluster.our_slices()), pool_names(&pool(3)));
    publisher.stop().await;
}
