//! The publisher when the API server fails it: refusing, rejecting, dropping
//! taints, restarting.

use crate::common::*;
use wdp_dra_client::{AttributeValue, DraDevice};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_server_shows_in_the_status_until_it_recovers() {
    let cluster = Cluster::start().await;
    cluster.server.set_refusing(true);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(3));

    let failing = status_where(&mut status, "an error", |s| s.error.is_some()).await;
    let error = failing.error.unwrap();
    assert!(error.contains(DRIVER) && error.contains(NODE), "{error}");
    assert!(error.contains("503"), "{error}");
    assert_eq!(failing.published, None);

    cluster.server.set_refusing(false);
    let recovered = status_where(&mut status, "recovery", |s| s.published.is_some()).await;
    assert_eq!(recovered.error, None);
    assert_eq!(device_names(&cluster.our_slices()), gpu_names(3));
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_names_the_field() {
    let cluster = Cluster::start().await;
    let mut bad_pool = target();
    bad_pool.pool_name = "Bad_Pool".into();
    let publisher = cluster.publisher(bad_pool);
    let mut status = publisher.status();
    publisher.publish(gpus(1));

    let rejected = status_where(&mut status, "a rejection", |s| s.error.is_some()).await;
    let error = rejected.error.unwrap();
    assert!(error.contains("422"), "{error}");
    assert!(
        error.contains("spec.pool.name"),
        "the field is named: {error}"
    );
    assert!(error.contains(DRIVER) && error.contains(NODE), "{error}");
    assert!(cluster.our_slices().is_empty());
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_the_server_would_reject_is_left_out_and_named() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let bad =
        DraDevice::new("gpu9").with_attribute("model", AttributeValue::String("m".repeat(65)));
    let mut devices = gpus(1);
    devices.push(bad);
    publisher.publish(devices);

    let published = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    assert_eq!(published.error, None);
    assert_eq!(published.published.unwrap().devices, 1);
    assert_eq!(device_names(&cluster.our_slices()), gpu_names(1));
    assert_eq!(published.problems.len(), 1, "{:?}", published.problems);
    let problem = &published.problems[0];
    assert_eq!(problem.device.as_deref(), Some("gpu9"));
    assert!(
        problem.field.starts_with("attributes[\"model\"]"),
        "{problem}"
    );

    publisher.publish(gpus(2));
    let fixed = status_where(&mut status, "the fixed list published", |s| {
        s.published.as_ref().is_some_and(|p| p.devices == 2)
    })
    .await;
    assert!(fixed.problems.is_empty(), "{:?}", fixed.problems);
    assert_eq!(device_names(&cluster.our_slices()), gpu_names(2));
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_taints_are_detected_and_do_not_cause_endless_writes() {
    let cluster = Cluster::start().await;
    cluster.server.set_taints_dropped(true);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let mut devices = gpus(2);
    devices[0] = devices[0].clone().with_taint(unhealthy_taint());
    publisher.publish(devices.clone());

    let dropped = status_where(&mut status, "taints seen dropped", |s| s.taints_dropped).await;
    assert!(dropped.published.is_some());
    assert!(
        cluster
            .our_slices()
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .all(|d| d.taints.is_none())
    );
    let writes = cluster.writes();

    // Publishing the same devices again writes nothing: the missing taints are
    // the server's doing, not a difference to fix.
    publisher.publish(devices);
    status_where(&mut status, "another pass", |s| s.passes > dropped.passes).await;
    assert_eq!(cluster.writes(), writes);
    assert!(status.borrow().taints_dropped);
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_server_restart_a_wipe_is_still_noticed() {
    let mut cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(2));
    status_where(&mut status, "a published pool", |s| s.published.is_some()).await;

    within("the restart", cluster.server.restart())
        .await
        .expect("the fake restarts");
    cluster.server.wipe_node_slices(NODE, Some(DRIVER));
    slices_where(&cluster.server, "re-created slices", |s| {
        device_names(s) == gpu_names(2)
    })
    .await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wipe_during_an_outage_is_repaired_once_the_server_is_back() {
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    publisher.publish(gpus(2));
    status_where(&mut status, "a published pool", |s| s.published.is_some()).await;

    cluster.server.set_refusing(true);
    cluster.server.wipe_node_slices(NODE, None);
    // The history is gone too, so the watch must list again to see the wipe.
    cluster.server.compact();
    cluster.server.set_refusing(false);
    slices_where(&cluster.server, "re-created slices", |s| {
        device_names(s) == gpu_names(2)
    })
    .await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_back_off_instead_of_hammering_the_server() {
    let cluster = Cluster::start().await;
    cluster.server.set_refusing(true);
    let publisher = cluster.publisher(target());
    // The backoff alone paces the retries here.
    publisher.set_min_write_interval(std::time::Duration::ZERO);
    let mut status = publisher.status();
    let started = std::time::Instant::now();
    let requests_before = cluster.server.stats().requests_total;
    publisher.publish(gpus(1));

    // Five failures are four waits: 100 + 200 + 400 + 800 ms at least (jitter
    // adds up to half again).
    status_where(&mut status, "five failed passes", |s| s.failed_passes >= 5).await;
    let elapsed = started.elapsed();
    let requests = cluster.server.stats().requests_total - requests_before;
    eprintln!("5 failed passes took {elapsed:?} and {requests} requests (watch retries included)");
    assert!(
        elapsed >= std::time::Duration::from_millis(1500),
        "{elapsed:?}"
    );
    assert!(requests < 30, "{requests} requests in {elapsed:?}");
    cluster.server.set_refusing(false);
    status_where(&mut status, "recovery", |s| s.published.is_some()).await;
    publisher.stop().await;
}
