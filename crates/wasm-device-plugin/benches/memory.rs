//! RSS of the real binary serving the shipped configuration (4 resources,
//! 5 guests) against the simulated kubelet:
//! `cargo bench -p wasm-device-plugin --bench memory`.
//!
//! Side by side in one run, for each way of getting compiled guests:
//! idle RSS once every resource is registered, then RSS and peak (VmHWM)
//! after a load of `WDP_BENCH_ADMISSIONS` (default 2,000) admissions on
//! every resource with a guest (GetPreferredAllocation, Allocate,
//! PreStartContainer). `WDP_BENCH_BINARY` measures another build (the
//! static one of the image, say). Goals: idle < 15 MiB, under load < 20 MiB.

mod support;

use std::time::Duration;

use support::{Layout, SHIPPED_RESOURCES, status_kib};
use wdp_kubelet_sim::SimKubelet;

struct Figures {
    idle_kib: u64,
    idle_anon_kib: u64,
    loaded_kib: u64,
    peak_kib: u64,
}

async fn measure(host_toml_extra: &str, admissions: usize) -> Figures {
    let layout = Layout::shipped();
    let host_toml = layout.config.join("host.toml");
    let mut text = std::fs::read_to_string(&host_toml).unwrap();
    // Top-level keys go before the first table.
    text = text.replacen(
        "[hook-defaults]",
        &format!("{host_toml_extra}\n[hook-defaults]"),
        1,
    );
    std::fs::write(&host_toml, text).unwrap();
    let kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
    let mut child = layout.run(&[]);
    let pid = child.id().unwrap();
    for r in SHIPPED_RESOURCES {
        kubelet
            .wait_registered(r, 1, Duration::from_secs(60))
            .await
            .unwrap();
    }
    // Idle: after the first refreshes are over.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_kib = status_kib(pid, "VmRSS");
    let idle_anon_kib = status_kib(pid, "RssAnon");
    for _ in 0..admissions {
        for (resource, count) in [
            ("wasm-device-plugin.io/loop", 2),
            ("wasm-device-plugin.io/tun", 1),
            ("wasm-device-plugin.io/fuse", 1),
        ] {
            let admission = kubelet.admit(resource, count).await.unwrap();
            kubelet.release(resource, &admission.devices);
        }
    }
    let loaded_kib = status_kib(pid, "VmRSS");
    let peak_kib = status_kib(pid, "VmHWM");
    child.start_kill().unwrap();
    let _ = child.wait().await;
    Figures {
        idle_kib,
        idle_anon_kib,
        loaded_kib,
        peak_kib,
    }
}

#[tokio::main]
async fn main() {
    let admissions: usize = std::env::var("WDP_BENCH_ADMISSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    println!("binary: {}", support::binary());
    println!(
        "RSS with the shipped config (4 resources, 5 guests); load = {admissions} admissions on loop, tun and fuse"
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    for (what, extra) in MODES {
        let f = measure(extra, admissions).await;
        println!(
            "  {what:<44} idle {:>5.1} MiB (anon {:>5.1})  after load {:>5.1} MiB  peak {:>5.1} MiB",
            mib(f.idle_kib),
            mib(f.idle_anon_kib),
            mib(f.loaded_kib),
            mib(f.peak_kib)
        );
    }
    println!("  (goals: idle < 15 MiB, under load < 20 MiB)");
}

/// Each way compiled guests reach the serving process, as `host.toml` keys.
const MODES: [(&str, &str); 2] = [
    ("shipped host.toml (compiled in-process)", ""),
    (
        "+ precompiled-cache-dir (compiled by a child)",
        "precompiled-cache-dir = \"cache\"",
    ),
];
