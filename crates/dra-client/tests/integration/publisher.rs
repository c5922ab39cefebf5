//! The publisher against the fake API server with the real kube client: what
//! it writes, when it writes nothing, generation bumps, wipes, stop and withdraw.

use crate::common::*;
use wdp_dra_client::{AttributeValue, PoolTarget};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_publish_creates_the_pool_and_the_same_devices_write_nothing() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(130));

    let first = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    let pool = first.published.clone().unwrap();
    assert_eq!((pool.generation, pool.slices, pool.devices), (1, 2, 130));
    assert_eq!(first.error, None);
    let slices = cluster.our_slices();
    assert_eq!(slices.len(), 2);
    assert!(complete_pool_at(&slices, 1), "{slices:#?}");
    assert_eq!(device_names(&slices), gpu_names(130));
    for slice in &slices {
        let name = slice.metadata.name.as_deref().unwrap();
        assert!(name.starts_with("node-1-gpu.example.com-"), "{name}");
        let device = &slice.spec.devices.as_ref().unwrap()[0];
        let attributes = device.attributes.as_ref().unwrap();
        assert_eq!(
            attributes["gpu.example.com/model"].string.as_deref(),
            Some("A100")
        );
    }
    let writes_after_first = cluster.writes();
    assert_eq!(writes_after_first, 2);
    assert_eq!(first.writes, 2);

    // The same devices, in another order: a pass runs, nothing is written.
    let mut reordered = gpus(130);
    reordered.reverse();
    publisher.publish(reordered);
    let second = status_where(&mut status, "a second pass", |s| s.passes > first.passes).await;
    assert_eq!(
        cluster.writes(),
        writes_after_first,
        "{:?}",
        cluster.server.stats()
    );
    assert_eq!(second.writes, 2);
    assert_eq!(second.published.unwrap().generation, 1);
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_bumps_the_generation_of_every_slice() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(200));
    status_where(&mut status, "generation 1", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 1)
    })
    .await;
    let names_before: Vec<_> = cluster
        .our_slices()
        .iter()
        .map(|s| s.metadata.name.clone())
        .collect();

    let mut changed = gpus(200);
    changed[150]
        .attributes
        .insert("model".into(), AttributeValue::String("H100".into()));
    publisher.publish(changed);
    status_where(&mut status, "generation 2", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 2)
    })
    .await;
    let slices = cluster.our_slices();
    assert!(complete_pool_at(&slices, 2), "{slices:#?}");
    let names_after: Vec<_> = slices.iter().map(|s| s.metadata.name.clone()).collect();
    assert_eq!(
        names_before, names_after,
        "the slices are replaced in place"
    );

    // Fewer devices: the surplus slice goes, the rest carry generation 3.
    publisher.publish(gpus(5));
    status_where(&mut status, "generation 3", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 3)
    })
    .await;
    let slices = cluster.our_slices();
    assert_eq!(slices.len(), 1);
    assert!(complete_pool_at(&slices, 3), "{slices:#?}");
    assert_eq!(device_names(&slices), gpu_names(5));

    // No devices: one empty slice keeps the pool visible at its new generation.
    publisher.publish(Vec::new());
    status_where(&mut status, "generation 4", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 4)
    })
    .await;
    let slices = cluster.our_slices();
    assert!(complete_pool_at(&slices, 4), "{slices:#?}");
    assert!(device_names(&slices).is_empty());
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wiped_slices_are_published_again() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(3));
    status_where(&mut status, "a published pool", |s| s.published.is_some()).await;

    let wiped_at = std::time::Instant::now();
    assert_eq!(cluster.server.wipe_node_slices(NODE, None), 1);
    let slices = slices_where(&cluster.server, "re-created slices", |s| {
        device_names(s) == gpu_names(3)
    })
    .await;
    eprintln!("slices re-created {:?} after the wipe", wiped_at.elapsed());
    assert!(
        complete_pool_at(&slices, 2),
        "a new generation after the wipe: {slices:#?}"
    );
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_by_others_are_undone() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(3));
    status_where(&mut status, "a published pool", |s| s.published.is_some()).await;

    let api: kube::Api<wdp_fake_apiserver::ResourceSlice> = kube::Api::all(cluster.client.clone());
    let mut edited = cluster.our_slices().remove(0);
    edited.spec.devices.as_mut().unwrap().pop();
    let name = edited.metadata.name.clone().unwrap();
    within("the edit", api.replace(&name, &Default::default(), &edited))
        .await
        .expect("the edit is accepted");
    let slices = slices_where(&cluster.server, "the edit undone", |s| {
        device_names(s) == gpu_names(3)
    })
    .await;
    assert!(complete_pool_at(&slices, 2), "{slices:#?}");
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_quick_publishes_coalesce() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    for round in 0..1000 {
        let mut devices = gpus(4);
        devices[0]
            .attributes
            .insert("round".into(), AttributeValue::Int(round));
        publisher.publish(devices);
    }
    slices_where(&cluster.server, "the last round published", |slices| {
        slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .any(|d| {
                d.attributes
                    .as_ref()
                    .and_then(|a| a.get("gpu.example.com/round"))
                    .and_then(|v| v.int)
                    == Some(999)
            })
    })
    .await;
    let settled = status_where(&mut status, "the status of the last round", |s| {
        s.published.is_some()
    })
    .await;
    let writes = cluster.writes();
    eprintln!(
        "1000 publishes made {writes} writes in {} passes",
        settled.passes
    );
    assert!(writes <= 10, "{writes} writes for 1000 quick publishes");
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taint_times_set_by_the_server_are_kept() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let mut devices = gpus(2);
    devices[1] = devices[1].clone().with_taint(unhealthy_taint());
    publisher.publish(devices.clone());
    status_where(&mut status, "generation 1", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 1)
    })
    .await;
    let taint_time = |slices: &[wdp_fake_apiserver::ResourceSlice]| {
        slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .find_map(|d| d.taints.as_ref()?.first()?.time_added.clone())
    };
    let first_time = taint_time(&cluster.our_slices()).expect("the server stamped timeAdded");

    devices[0]
        .attributes
        .insert("model".into(), AttributeValue::String("H100".into()));
    publisher.publish(devices);
    status_where(&mut status, "generation 2", |s| {
        s.published.as_ref().is_some_and(|p| p.generation == 2)
    })
    .await;
    assert_eq!(taint_time(&cluster.our_slices()), Some(first_time));
    assert!(!status.borrow().taints_dropped);
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn withdraw_deletes_only_this_driver_on_this_node_and_stop_deletes_nothing() {
    let cluster = Cluster::start().await;
    let ours = cluster.publisher(target());
    let other_driver = cluster.publisher(PoolTarget::new("nic.example.com", NODE));
    let other_node = cluster.publisher(PoolTarget::new(DRIVER, "node-2"));
    let mut statuses = Vec::new();
    for publisher in [&ours, &other_driver, &other_node] {
        publisher.publish(gpus(130));
        statuses.push(publisher.status());
    }
    for status in &mut statuses {
        status_where(status, "a published pool", |s| s.published.is_some()).await;
    }
    assert_eq!(cluster.server.slices().len(), 6);

    let deleted = within("withdraw", ours.withdraw())
        .await
        .expect("withdraw succeeds");
    assert_eq!(deleted, 2);
    assert!(cluster.our_slices().is_empty());
    assert_eq!(cluster.server.slices_of(NODE, "nic.example.com").len(), 2);
    assert_eq!(cluster.server.slices_of("node-2", DRIVER).len(), 2);

    within("stop", other_driver.stop()).await;
    assert_eq!(cluster.server.slices_of(NODE, "nic.example.com").len(), 2);
    other_node.stop().await;
    assert_eq!(cluster.server.slices().len(), 4);
}
