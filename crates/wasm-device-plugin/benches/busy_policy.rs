//! A busy policy must not delay the kubelet. Two resources over the same
//! eight fixture GPUs, side by side in one real host: one whose health
//! guest spins to its deadline on every poll, one with a fast health
//! guest; both with the example allocate and packing guests. Prints
//! `Allocate` and `GetPreferredAllocation` round trips for each (run with
//! `cargo bench -p wasm-device-plugin --bench busy_policy`).

use std::time::{Duration, Instant};

use wdp_kubelet_api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    PreferredAllocationRequest,
};
use wdp_kubelet_sim::SimKubelet;
use wdp_test_support::measure::percentile;

const BUSY: &str = "bench.example.com/busy-gpu";
const CALM: &str = "bench.example.com/calm-gpu";
const HEALTH_TIMEOUT_MS: u64 = 250;

fn resource(name: &str, health: &str) -> String {
    format!(
        r#"version = 1
resource = "{name}"
[[pci]]
vendor = "0x10de"
class = "0x0302"
[hooks.health]
guest = "guests/{health}"
timeout-ms = {HEALTH_TIMEOUT_MS}
[hooks.preferred-allocation]
guest = "guests/numa-packing.wasm"
[hooks.allocate]
guest = "guests/allocate-shaper.wasm"
"#
    )
}

async fn measure(
    kubelet: &SimKubelet,
    name: &str,
    rounds: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut client = kubelet.client(name).await.unwrap();
    let ids = kubelet.plugin(name).unwrap().healthy_ids();
    let (mut allocate, mut preferred) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        let started = Instant::now();
        client
            .allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: vec![ids[i % ids.len()].clone()],
                }],
            })
            .await
            .unwrap();
        allocate.push(started.elapsed());
        let started = Instant::now();
        client
            .get_preferred_allocation(PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: ids.clone(),
                    must_include_device_i_ds: vec![],
                    allocation_size: 2,
                }],
            })
            .await
            .unwrap();
        preferred.push(started.elapsed());
    }
    (allocate, preferred)
}

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, config, plugins) = (
        tmp.path().join("root"),
        tmp.path().join("config"),
        tmp.path().join("plugins"),
    );
    for d in [&root, &config.join("guests"), &plugins] {
        std::fs::create_dir_all(d).unwrap();
    }
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/gpu-server/."
    );
    assert!(
        std::process::Command::new("cp")
            .args(["-a", fixture])
            .arg(&root)
            .status()
            .unwrap()
            .success()
    );
    for (built, name) in [
        (wdp_guest_artifacts::HOSTILE_BUSY_HEALTH, "busy-health.wasm"),
        (wdp_guest_artifacts::PRESENCE_HEALTH, "presence-health.wasm"),
        (wdp_guest_artifacts::NUMA_PACKING, "numa-packing.wasm"),
        (wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm"),
    ] {
        std::fs::copy(built, config.join("guests").join(name)).unwrap();
    }
    std::fs::write(
        config.join("host.toml"),
        "version = 1\npoll-interval-ms = 50\n",
    )
    .unwrap();
    std::fs::write(config.join("busy.toml"), resource(BUSY, "busy-health.wasm")).unwrap();
    std::fs::write(
        config.join("calm.toml"),
        resource(CALM, "presence-health.wasm"),
    )
    .unwrap();

    let kubelet = SimKubelet::start(&plugins).await.unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasm-device-plugin"))
        .args(["run", "--config-dir"])
        .arg(&config)
        .arg("--device-plugin-dir")
        .arg(&plugins)
        .arg("--host-root")
        .arg(&root)
        .env("RUST_LOG", "error")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let wait = Duration::from_secs(20);
    for r in [BUSY, CALM] {
        kubelet.wait_registered(r, 1, wait).await.unwrap();
    }
    // From now on every poll of the busy resource spins to its deadline.
    for entry in std::fs::read_dir(root.join("sys/bus/pci/devices")).unwrap() {
        let dir = entry.unwrap().path();
        if std::fs::read_to_string(dir.join("vendor")).is_ok_and(|v| v.trim() == "0x10de") {
            std::fs::write(dir.join("busy"), "1").unwrap();
        }
    }
    // Let the first spinning polls start.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let rounds = 1_000;
    let (mut calm_alloc, mut calm_pref) = measure(&kubelet, CALM, rounds).await;
    let (mut busy_alloc, mut busy_pref) = measure(&kubelet, BUSY, rounds).await;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "busy policy figures: 8 GPUs, example allocate + packing guests, {rounds} rounds each; \
         the busy resource's health guest spins to its {HEALTH_TIMEOUT_MS} ms deadline every 50 ms poll"
    );
    for (label, samples_calm, samples_busy) in [
        ("Allocate", &mut calm_alloc, &mut busy_alloc),
        ("GetPreferredAllocation", &mut calm_pref, &mut busy_pref),
    ] {
        let (c50, c99) = (
            percentile(samples_calm, 0.5),
            percentile(samples_calm, 0.99),
        );
        let (b50, b99) = (
            percentile(samples_busy, 0.5),
            percentile(samples_busy, 0.99),
        );
        println!(
            "  {label:<23} fast health: p50 {:>8.1} µs p99 {:>8.1} µs | spinning health: p50 {:>8.1} µs p99 {:>8.1} µs | goal p99 ≤ 3 × {:.1} µs + 5 ms: {}",
            us(c50),
            us(c99),
            us(b50),
            us(b99),
            us(c99),
            if b99 <= c99 * 3 + Duration::from_millis(5) {
                "met"
            } else {
                "MISSED"
            }
        );
    }
    child.start_kill().unwrap();
    let _ = child.wait().await;
}
