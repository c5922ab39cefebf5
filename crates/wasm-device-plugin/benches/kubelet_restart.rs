//! Kubelet restart → every resource registered again, with the shipped
//! configuration (4 resources, 4 guests) on the real binary:
//! `cargo bench -p wasm-device-plugin --bench kubelet_restart`.
//! `WDP_BENCH_RESTARTS` sets the number of restarts (default 100).
//!
//! The simulated kubelet restarts like a real one: it stops serving,
//! deletes every socket in the folder (ours included) and serves a new
//! `kubelet.sock`. The figure is the time from the restart to the last
//! resource's first `ListAndWatch` list on the new kubelet. Goal: max
//! below 50 ms.

mod support;

use std::time::{Duration, Instant};

use support::{Layout, SHIPPED_RESOURCES, ms, percentile};
use wdp_kubelet_sim::SimKubelet;

#[tokio::main]
async fn main() {
    let restarts: usize = std::env::var("WDP_BENCH_RESTARTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let layout = Layout::shipped();
    let mut kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
    let mut child = layout.run(&[]);
    let wait = Duration::from_secs(20);
    for r in SHIPPED_RESOURCES {
        kubelet.wait_registered(r, 1, wait).await.unwrap();
    }
    let mut samples = Vec::with_capacity(restarts);
    for _ in 0..restarts {
        let started = Instant::now();
        kubelet.restart().await.unwrap();
        for r in SHIPPED_RESOURCES {
            kubelet.wait_registered(r, 1, wait).await.unwrap();
        }
        samples.push(started.elapsed());
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
    let max = *samples.iter().max().unwrap();
    let over = samples
        .iter()
        .filter(|d| **d > Duration::from_millis(50))
        .count();
    println!(
        "kubelet restart -> all {} shipped resources registered, {restarts} restarts: \
         p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms, {over} over 50 ms (goal: max < 50 ms)",
        SHIPPED_RESOURCES.len(),
        ms(percentile(&mut samples, 0.5)),
        ms(percentile(&mut samples, 0.99)),
        ms(max),
    );
}
