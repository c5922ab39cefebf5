//! The publisher's write budget, as an operator sees it on the API server: a
//! flapping device or a node-wide health event costs at most one pass per
//! write interval and the newest state lands; an overloaded server's
//! `Retry-After` is waited out.

use std::time::{Duration, Instant};

use crate::common::*;
use tokio::sync::watch;
use wdp_dra_client::{DeviceTaint, DraDevice, PublishStatus, TaintEffect};
use wdp_fake_apiserver::{ResourceSlice, Throttle, ThrottleBody};

/// The taint values of `device` on the server.
fn taint_values(slices: &[ResourceSlice], device: &str) -> Vec<String> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .filter(|d| d.name == device)
        .flat_map(|d| d.taints.iter().flatten())
        .filter_map(|t| t.value.clone())
        .collect()
}

/// The publisher's status once it counts the pass that wrote `pool` (the
/// slices seen on the server): a pass's writes reach the server before the
/// pass is counted.
async fn status_counting(
    status: &mut watch::Receiver<PublishStatus>,
    pool: &[ResourceSlice],
) -> PublishStatus {
    let generation = pool[0].spec.pool.generation;
    status_where(status, "the pass that wrote the pool counted", |s| {
        s.published
            .as_ref()
            .is_some_and(|p| p.generation == generation)
    })
    .await
}

/// `gpus(2)` with gpu0 tainted `value`, or healthy when `None`.
fn with_gpu0(value: Option<String>) -> Vec<DraDevice> {
    let mut devices = gpus(2);
    if let Some(value) = value {
        devices[0] = devices[0].clone().with_taint(DeviceTaint {
            key: "gpu.example.com/unhealthy".into(),
            value,
            effect: TaintEffect::NoSchedule,
        });
    }
    devices
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flapping_device_costs_at_most_one_pass_per_interval_and_its_newest_state_lands() {
    // The production ratio (a flap every 100 ms, a 1 s interval), ten times faster.
    const INTERVAL: Duration = Duration::from_millis(100);
    const FLAP: Duration = Duration::from_millis(10);
    const FLAPPING_FOR: Duration = Duration::from_secs(2);
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    publisher.set_min_write_interval(INTERVAL);
    let mut status = publisher.status();
    publisher.publish(with_gpu0(None));
    let before = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    let writes_before = cluster.writes();

    // Healthy and unhealthy in turn, each unhealthy spell with its own reason,
    // ending unhealthy: the newest state differs from every earlier one.
    let mut ticks = tokio::time::interval(FLAP);
    let started = Instant::now();
    let mut flaps = 0u32;
    let newest = loop {
        ticks.tick().await;
        flaps += 1;
        let reason = (flaps % 2 == 1).then(|| format!("flap-{flaps}"));
        publisher.publish(with_gpu0(reason.clone()));
        if flaps % 2 == 1 && started.elapsed() >= FLAPPING_FOR {
            break reason.expect("odd flaps taint");
        }
    };
    let flapping_for = started.elapsed();

    let newest_pool = slices_where(&cluster.server, "the newest state", |s| {
        taint_values(s, "gpu0") == [newest.clone()]
    })
    .await;
    let after = status_counting(&mut status, &newest_pool).await;
    let writes = cluster.writes() - writes_before;
    let passes = after.passes + after.failed_passes - before.passes - before.failed_passes;
    // Passes start at least INTERVAL apart: those during the flapping, and
    // the trailing one after it. Each rewrites the pool's one slice.
    let bound = (flapping_for.as_millis() / INTERVAL.as_millis()) as u64 + 2;
    eprintln!(
        "{flaps} changes in {flapping_for:?}: {passes} passes, {writes} writes (bound {bound})"
    );
    assert!(passes <= bound, "{passes} passes, bound {bound}");
    assert!(writes <= bound, "{writes} writes, bound {bound}");
    assert!(
        u64::from(flaps) > 5 * writes,
        "{flaps} changes, {writes} writes"
    );
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_devices_turning_unhealthy_one_by_one_cost_a_handful_of_passes() {
    const INTERVAL: Duration = Duration::from_millis(500);
    let cluster = Cluster::start().await;
    let publisher = cluster.publisher(target());
    publisher.set_min_write_interval(INTERVAL);
    let mut status = publisher.status();
    let mut devices = gpus(1000);
    publisher.publish(devices.clone());
    let before = status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    let writes_before = cluster.writes();

    // The worst case: one new device list per device turning unhealthy.
    let started = Instant::now();
    for index in 0..devices.len() {
        devices[index] = devices[index].clone().with_taint(unhealthy_taint());
        publisher.publish(devices.clone());
    }
    let event_took = started.elapsed();
    let tainted = slices_where(&cluster.server, "every device tainted", |s| {
        s.iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .filter(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
            .count()
            == 1000
            && complete_pool_at(s, s[0].spec.pool.generation)
    })
    .await;
    let after = status_counting(&mut status, &tainted).await;
    let passes = after.passes - before.passes;
    let writes = cluster.writes() - writes_before;
    // The leading pass, one per interval while the lists kept coming, the trailing one;
    // each rewrites at most the 16 slices of 64 tainted devices (or creates them).
    let pass_bound = (event_took.as_millis() / INTERVAL.as_millis()) as u64 + 2;
    eprintln!(
        "1000 device lists in {event_took:?}: {passes} passes, {writes} writes (pass bound {pass_bound})"
    );
    assert!(passes <= pass_bound, "{passes} passes, bound {pass_bound}");
    assert!(writes <= passes * 16, "{writes} writes in {passes} passes");
    publisher.stop().await;
}

/// Publishes one device against a server that refuses the first `count`
/// writes with `code` and `Retry-After: 1`, and returns the write attempts
/// the server saw.
async fn publish_through(code: u16, count: u32, body: ThrottleBody) -> Vec<(Instant, u16)> {
    let cluster = Cluster::start().await;
    cluster.server.throttle_writes(Throttle {
        code,
        retry_after_seconds: 1,
        count,
        body,
    });
    let publisher = cluster.publisher(target());
    // No interval: only the backoff and the server's Retry-After pace retries.
    publisher.set_min_write_interval(Duration::ZERO);
    let mut status = publisher.status();
    publisher.publish(gpus(1));
    let failed = status_where(&mut status, "a refused pass", |s| s.error.is_some()).await;
    let error = failed.error.expect("an error");
    assert!(error.contains(&code.to_string()), "{error}");
    status_where(&mut status, "the pool published", |s| {
        s.published.is_some() && s.error.is_none()
    })
    .await;
    assert_eq!(device_names(&cluster.our_slices()), gpu_names(1));
    publisher.stop().await;
    cluster
        .server
        .write_attempts()
        .into_iter()
        .map(|attempt| (attempt.at, attempt.code))
        .collect()
}

/// Asserts the attempts are `count` refusals then a success, each at least a second apart.
fn assert_waited_out(attempts: &[(Instant, u16)], code: u16, count: usize) {
    let codes: Vec<u16> = attempts.iter().map(|(_, code)| *code).collect();
    let mut expected = vec![code; count];
    expected.push(201);
    assert_eq!(codes, expected);
    for pair in attempts.windows(2) {
        let gap = pair[1].0 - pair[0].0;
        eprintln!("retried after {gap:?}");
        assert!(gap >= Duration::from_secs(1), "retried after {gap:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_with_retry_after_in_the_header_only_is_not_retried_before_it() {
    let attempts = publish_through(429, 1, ThrottleBody::PlainText).await;
    assert_waited_out(&attempts, 429, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_with_retry_after_in_its_status_is_not_retried_before_it() {
    let attempts = publish_through(503, 2, ThrottleBody::Status).await;
    assert_waited_out(&attempts, 503, 2);
}
