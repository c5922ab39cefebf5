//! One publisher at a handover: an instance whose write fence has closed
//! (a newer instance named itself the publisher) answers the newer one's
//! writes, which it sees as foreign changes, with no write of its own, and
//! writes again once the fence opens (a rollback).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common::*;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::SlicePublisher;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_publisher_leaves_the_newer_ones_pool_alone_until_the_fence_opens() {
    let cluster = Cluster::start().await;
    let old_may_write = Arc::new(AtomicBool::new(true));
    let fence = {
        let open = old_may_write.clone();
        Arc::new(move || open.load(Ordering::SeqCst))
    };
    let old = SlicePublisher::spawn_fenced(
        cluster.client.clone(),
        target(),
        fence,
        CancellationToken::new(),
    );
    let mut old_status = old.status();
    old.publish(gpus(2));
    slices_where(&cluster.server, "the old instance's two GPUs", |s| {
        device_names(s) == gpu_names(2)
    })
    .await;

    // A newer instance names itself (the old fence closes), then publishes
    // one GPU: to the old publisher, a foreign change of its pool.
    old_may_write.store(false, Ordering::SeqCst);
    let new = cluster.publisher(target());
    new.publish(gpus(1));
    slices_where(&cluster.server, "the new instance's one GPU", |s| {
        device_names(s) == gpu_names(1)
    })
    .await;

    // The old publisher saw it, wanted to put its two GPUs back, and was
    // held back by its fence, pass after pass: nothing written between
    // two held-back passes, and the new instance's GPU stands.
    let first = status_where(&mut old_status, "a pass held back by the fence", |s| {
        s.fenced_passes > 0
    })
    .await
    .fenced_passes;
    let writes = cluster.writes();
    status_where(&mut old_status, "another pass held back", |s| {
        s.fenced_passes > first
    })
    .await;
    assert_eq!(cluster.writes(), writes);
    assert_eq!(device_names(&cluster.our_slices()), gpu_names(1));

    // A rollback: the newer instance goes, the old one's fence opens, and
    // its pool is written again.
    new.stop().await;
    old_may_write.store(true, Ordering::SeqCst);
    slices_where(&cluster.server, "the old instance's pool back", |s| {
        device_names(s) == gpu_names(2)
    })
    .await;
}
