//! Figures for the kubelet-facing path, measured on the real binary against
//! the simulated kubelet (run with `cargo bench -p wasm-device-plugin`):
//! re-registration time after a kubelet restart (through `kubelet.sock`
//! and through the plugin watcher, whose restart cleans the registry
//! folder), Allocate and
//! GetPreferredAllocation round trips over the Unix socket with the
//! built-in policy, and the host's idle RSS with four resources.
//!
//! `WDP_BENCH_BINARY=PATH` measures another build of the binary instead,
//! e.g. the static one deploy/build-image.sh puts in the image:
//! `WDP_BENCH_BINARY=target/x86_64-unknown-linux-musl/release/wasm-device-plugin`.
//!
//! Re-registration of all 4 resources after a kubelet restart, measured on
//! the 2-core development machine (shared with other builds), 50 restarts:
//! `kubelet.sock` p50 1.5 ms / p99 28 ms; plugin watcher (registry folder
//! cleaned) p50 3.1 ms / p99 5.6 ms. Before registration sockets were
//! renamed into place after listen(), the plugin-watcher p99 was 104 ms:
//! the watcher saw the socket before it listened and had to try again.

use std::time::{Duration, Instant};

use wdp_kubelet_api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    PreferredAllocationRequest,
};
use wdp_kubelet_sim::{SimKubelet, SimPluginWatcher};
use wdp_test_support::measure::{percentile, rss_kib};

const RESOURCES: [&str; 4] = [
    "bench.example.com/fuse",
    "bench.example.com/tun",
    "bench.example.com/kvm",
    "bench.example.com/loop",
];

#[tokio::main]
async fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let config = tmp.path().join("config");
    let plugins = tmp.path().join("plugins");
    for d in [&config, &plugins, &root.join("dev/net")] {
        std::fs::create_dir_all(d).unwrap();
    }
    for node in [
        "dev/fuse",
        "dev/net/tun",
        "dev/kvm",
        "dev/loop0",
        "dev/loop1",
        "dev/loop2",
        "dev/loop3",
    ] {
        std::fs::write(root.join(node), b"").unwrap();
    }
    let files = [
        ("fuse.toml", RESOURCES[0], "/dev/fuse", "replicas = 64\n"),
        ("tun.toml", RESOURCES[1], "/dev/net/tun", "replicas = 8\n"),
        ("kvm.toml", RESOURCES[2], "/dev/kvm", "replicas = 8\n"),
        ("loop.toml", RESOURCES[3], "/dev/loop[0-9]*", ""),
    ];
    for (file, resource, path, extra) in files {
        std::fs::write(
            config.join(file),
            format!(
                "version = 1\nresource = \"{resource}\"\n[[nodes]]\npath = \"{path}\"\n{extra}"
            ),
        )
        .unwrap();
    }

    let mut kubelet = SimKubelet::start(&plugins).await.unwrap();
    let binary = std::env::var("WDP_BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_wasm-device-plugin").to_owned());
    println!("binary: {binary}");
    let mut child = tokio::process::Command::new(&binary)
        .args(["run", "--config-dir"])
        .arg(&config)
        .arg("--device-plugin-dir")
        .arg(&plugins)
        .arg("--host-root")
        .arg(&root)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let wait = Duration::from_secs(10);
    for r in RESOURCES {
        kubelet.wait_registered(r, 1, wait).await.unwrap();
    }
    let idle_rss = rss_kib(pid);

    // Allocate and GetPreferredAllocation round trips, one connection.
    let mut client = kubelet.client(RESOURCES[0]).await.unwrap();
    let ids: Vec<String> = kubelet.plugin(RESOURCES[0]).unwrap().healthy_ids();
    let rounds = 2_000;
    let mut allocate = Vec::with_capacity(rounds);
    let mut preferred = Vec::with_capacity(rounds);
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
                    allocation_size: 4,
                }],
            })
            .await
            .unwrap();
        preferred.push(started.elapsed());
    }
    let busy_rss = rss_kib(pid);

    // Kubelet restarts: time until every resource registered again.
    let restarts = 50;
    let mut reregister = Vec::with_capacity(restarts);
    for _ in 0..restarts {
        let started = Instant::now();
        kubelet.restart().await.unwrap();
        for r in RESOURCES {
            kubelet.wait_registered(r, 1, wait).await.unwrap();
        }
        reregister.push(started.elapsed());
    }

    child.start_kill().unwrap();
    let _ = child.wait().await;

    // The same through the plugin watcher: a second host, registration
    // sockets in a registry folder, no kubelet.sock at all.
    let registry = tmp.path().join("plugins_registry");
    let plugins_pw = tmp.path().join("plugins-pw");
    std::fs::create_dir_all(&plugins_pw).unwrap();
    let mut watcher = SimPluginWatcher::start(&registry).await.unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_wasm-device-plugin"))
        .args(["run", "--registration", "plugin-watcher", "--config-dir"])
        .arg(&config)
        .arg("--device-plugin-dir")
        .arg(&plugins_pw)
        .arg("--plugins-registry-dir")
        .arg(&registry)
        .arg("--host-root")
        .arg(&root)
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    for r in RESOURCES {
        watcher.wait_registered(r, 1, wait).await.unwrap();
    }
    let mut watcher_reregister = Vec::with_capacity(restarts);
    for _ in 0..restarts {
        let started = Instant::now();
        watcher.restart().await.unwrap();
        for r in RESOURCES {
            watcher.wait_registered(r, 1, wait).await.unwrap();
        }
        watcher_reregister.push(started.elapsed());
    }

    println!(
        "wasm-device-plugin kubelet protocol figures (4 resources, {} devices)",
        ids.len() + 8 + 8 + 4
    );
    println!(
        "  Allocate round trip:               p50 {:>8.1} µs   p99 {:>8.1} µs  ({rounds} calls)",
        percentile(&mut allocate, 0.5).as_secs_f64() * 1e6,
        percentile(&mut allocate, 0.99).as_secs_f64() * 1e6
    );
    println!(
        "  GetPreferredAllocation round trip: p50 {:>8.1} µs   p99 {:>8.1} µs  (size 4 of {})",
        percentile(&mut preferred, 0.5).as_secs_f64() * 1e6,
        percentile(&mut preferred, 0.99).as_secs_f64() * 1e6,
        ids.len()
    );
    println!(
        "  re-registration after restart:     p50 {:>8.1} ms   p99 {:>8.1} ms  ({restarts} restarts, all 4 resources)",
        percentile(&mut reregister, 0.5).as_secs_f64() * 1e3,
        percentile(&mut reregister, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  re-registration, plugin watcher:   p50 {:>8.1} ms   p99 {:>8.1} ms  ({restarts} restarts cleaning the registry, all 4 resources)",
        percentile(&mut watcher_reregister, 0.5).as_secs_f64() * 1e3,
        percentile(&mut watcher_reregister, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "  RSS: idle {:.1} MiB, after {} RPCs {:.1} MiB",
        idle_rss as f64 / 1024.0,
        rounds * 2,
        busy_rss as f64 / 1024.0
    );
    child.start_kill().unwrap();
    let _ = child.wait().await;
}
