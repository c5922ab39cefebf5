//! RSS of the real binary serving the shipped configuration (4 resources,
//! 4 guests) against the simulated kubelet:
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

async fn measure(compiled_in_process: bool, admissions: usize) -> Figures {
    let layout = Layout::shipped();
    let host_toml = layout.config.join("host.toml");
    let text = std::fs::read_to_string(&host_toml).unwrap();
    let text: String = text
        .lines()
        .filter(|line| !(compiled_in_process && line.starts_with("precompiled-cache-dir")))
        .map(|line| match line.starts_with("precompiled-cache-dir") {
            // The bench's own cache: the first run fills it in a child.
            true => "precompiled-cache-dir = \"cache\"".to_owned(),
            false => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
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
    if let Ok(dir) = std::env::var("WDP_BENCH_SMAPS_DIR") {
        // Where the idle RSS lives, mapping by mapping, for a closer look.
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap();
        let name = if compiled_in_process {
            "in-process"
        } else {
            "shipped"
        };
        std::fs::write(format!("{dir}/smaps-{name}.txt"), smaps).unwrap();
    }
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
        "RSS with the shipped config (4 resources, 4 guests); load = {admissions} admissions on loop, tun and fuse"
    );
    let mib = |kib: u64| kib as f64 / 1024.0;
    for (what, compiled_in_process) in MODES {
        let f = measure(compiled_in_process, admissions).await;
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

/// Each way compiled guests reach the serving process: the shipped
/// `host.toml` (a child compiles them into `precompiled-cache-dir`, the
/// serving process maps them), and without that key (compiled in-process).
const MODES: [(&str, bool); 2] = [
    ("shipped host.toml (compiled by a child, mapped)", false),
    ("without precompiled-cache-dir (compiled in-process)", true),
];
