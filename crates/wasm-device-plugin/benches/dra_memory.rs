//! Idle RSS of the real binary with and without DRA resources, side by
//! side in one run: `cargo bench -p wasm-device-plugin --bench dra_memory`.
//!
//! Three hosts on the same fixture root, each measured once every
//! resource is registered and its slices are published, after a settling
//! pause:
//!
//! - **device plugin only**: one device-plugin resource (`loop0`–`loop3`);
//! - **+ one DRA resource**: the same, and one DRA resource
//!   (`loop4`–`loop5`) against the in-process API server (kube client,
//!   its TLS configuration, the slice watch), the DRA kubelet stand-in;
//! - **+ two DRA resources**: and a second DRA resource (`loop6`–`loop7`,
//!   another driver).
//!
//! No guest anywhere: what is measured is the DRA side's own cost.
//! Printed per host: VmRSS, its anonymous and file-backed parts, threads.
//! `WDP_BENCH_SMAPS_DIR=DIR` also writes each host's `smaps` there;
//! `WDP_BENCH_BINARY` measures another build. Goal (issue 34): two DRA
//! resources under 18 MiB.

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{Layout, status_kib};
use wdp_fake_apiserver::FakeApiServer;
use wdp_kubelet_sim::{DraSimOptions, SimDraKubelet, SimKubelet};

const NODE: &str = "bench-node";
const WAIT: Duration = Duration::from_secs(30);
const PLUGIN_RESOURCE: &str = "bench.example.com/loop";

/// A DRA resource file for `driver` over `nodes`.
fn dra_file(name: &str, driver: &str, nodes: &str) -> String {
    format!(
        "version = 1\nresource = \"bench.example.com/{name}\"\napi = \"dra\"\ndriver = \"{driver}\"\n\n\
         [[nodes]]\npath = \"{nodes}\"\n"
    )
}

struct Figures {
    rss_kib: u64,
    anon_kib: u64,
    file_kib: u64,
    threads: u64,
}

async fn measure(dra_resources: usize) -> Figures {
    let layout = Layout::new();
    for i in 0..8 {
        std::fs::write(layout.root.join(format!("dev/loop{i}")), b"").unwrap();
    }
    std::fs::write(
        layout.config.join("loop.toml"),
        format!("version = 1\nresource = \"{PLUGIN_RESOURCE}\"\n\n[[nodes]]\npath = \"/dev/loop[0-3]\"\n"),
    )
    .unwrap();
    let drivers: Vec<String> = (0..dra_resources)
        .map(|i| format!("loop{i}.bench.example.com"))
        .collect();
    for (i, driver) in drivers.iter().enumerate() {
        let nodes = format!("/dev/loop[{}-{}]", 4 + 2 * i, 5 + 2 * i);
        std::fs::write(
            layout.config.join(format!("dra{i}.toml")),
            dra_file(&format!("dra{i}"), driver, &nodes),
        )
        .unwrap();
    }
    let registry = layout.tmp.path().join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let api = Arc::new(FakeApiServer::start().await.unwrap());
    let kubeconfig = layout.tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let dra = SimDraKubelet::start(&registry, DraSimOptions::default())
        .await
        .unwrap();
    let kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
    let mut child = layout.run_dra(&registry, &kubeconfig, NODE);
    let pid = child.id().unwrap();
    kubelet
        .wait_registered(PLUGIN_RESOURCE, 1, WAIT)
        .await
        .unwrap();
    for driver in &drivers {
        dra.wait_registered(driver, WAIT).await.unwrap();
    }
    api.wait_for_slices(
        |slices| {
            drivers.iter().all(|driver| {
                slices.iter().any(|s| {
                    &s.spec.driver == driver
                        && s.spec.devices.as_ref().is_some_and(|d| d.len() == 2)
                })
            })
        },
        WAIT,
    )
    .await
    .unwrap();
    // Idle: past the start-up code's release and the first polls.
    tokio::time::sleep(Duration::from_secs(6)).await;
    if let Ok(dir) = std::env::var("WDP_BENCH_SMAPS_DIR") {
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
        std::fs::write(format!("{dir}/smaps-dra-{dra_resources}.txt"), smaps).unwrap();
    }
    let figures = Figures {
        rss_kib: status_kib(pid, "VmRSS"),
        anon_kib: status_kib(pid, "RssAnon"),
        file_kib: status_kib(pid, "RssFile"),
        threads: status_kib(pid, "Threads"),
    };
    child.start_kill().unwrap();
    let _ = child.wait().await;
    figures
}

#[tokio::main]
async fn main() {
    println!("binary: {}", support::binary());
    let rounds: usize = std::env::var("WDP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!("idle RSS, {rounds} rounds, hosts alternating");
    for round in 0..rounds {
        for (what, dra) in [
            ("device plugin only", 0),
            ("+ one DRA resource", 1),
            ("+ two DRA resources", 2),
        ] {
            let f = measure(dra).await;
            println!(
                "  round {round}: {what:<22} {:>5.1} MiB (anon {:>5.1}, file {:>5.1}), {} threads",
                mib(f.rss_kib),
                mib(f.anon_kib),
                mib(f.file_kib),
                f.threads
            );
        }
    }
    println!("  (goal: two DRA resources under 18 MiB)");
}
