//! Switching a node's configuration set by its label, against the fake API
//! server and the simulated kubelet, the host in-process
//! (`cargo bench -p wasm-device-plugin --bench config_sets`):
//!
//! - label change → new set serving: from the Node written with the other
//!   set's name to the simulated kubelet seeing that set's own resource
//!   registered (the watch event, the set's validation and dry run, the
//!   swap, the new resource's registration), p50 / p99 / max over
//!   `WDP_BENCH_SWITCHES` switches (default 40) between two sets;
//! - meanwhile a caller admits a container (`GetPreferredAllocation`,
//!   `Allocate`) on the resource both sets serve alike, back to back: the
//!   admissions made and how many failed (a switch must fail none).
//!
//! Figures in docs/operator/configuration-sets.md.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use wdp_fake_apiserver::FakeApiServer;
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};
use wdp_kubelet_sim::SimKubelet;
use wdp_test_support::measure::percentile;

const LABEL: &str = "wasm-device-plugin.io/config";
const WAIT: Duration = Duration::from_secs(30);

fn resource(name: &str, path: &str) -> String {
    format!("version = 1\nresource = \"{name}\"\n[[nodes]]\npath = \"{path}\"\n")
}

fn node(value: &str) -> Node {
    let labels = BTreeMap::from([(LABEL.to_owned(), value.to_owned())]);
    serde_json::from_value(
        serde_json::json!({"metadata": {"name": "bench-node", "labels": labels}}),
    )
    .unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let switches: usize = std::env::var("WDP_BENCH_SWITCHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let tmp = tempfile::tempdir().unwrap();
    let path = |p: &str| tmp.path().join(p);
    for dir in [
        "root/dev/net",
        "config/sets/a",
        "config/sets/b",
        "plugins",
        "state",
    ] {
        std::fs::create_dir_all(path(dir)).unwrap();
    }
    for node in ["root/dev/fuse", "root/dev/net/tun", "root/dev/loop0"] {
        std::fs::write(path(node), "").unwrap();
    }
    std::fs::write(
        path("config/host.toml"),
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    )
    .unwrap();
    let fuse = resource("bench.example.com/fuse", "/dev/fuse");
    for (set, own, node_path) in [
        ("a", "bench.example.com/tun", "/dev/net/tun"),
        ("b", "bench.example.com/loop", "/dev/loop0"),
    ] {
        std::fs::write(path(&format!("config/sets/{set}/fuse.toml")), &fuse).unwrap();
        std::fs::write(
            path(&format!("config/sets/{set}/own.toml")),
            resource(own, node_path),
        )
        .unwrap();
    }
    let api = FakeApiServer::start().await.unwrap();
    api.put_node(node("a"));
    api.write_kubeconfig(&path("kubeconfig")).unwrap();
    let kubelet = SimKubelet::start(path("plugins")).await.unwrap();
    let options = HostOptions {
        config_dir: path("config"),
        device_plugin_dir: path("plugins"),
        host_root: path("root"),
        cdi_dir: path("cdi"),
        registration: wdp_kubelet_socket::RegistrationMode::Kubelet,
        plugins_registry_dir: path("plugins_registry"),
        plugins_dir: path("plugins"),
        state_dir: path("state"),
        kubeconfig: Some(path("kubeconfig")),
        node_name: "bench-node".to_owned(),
        instance_id: None,
        pod_resources_socket: path("pod-resources/kubelet.sock"),
        serve_last_good: true,
    };
    let host = Host::start(options, Metrics::new()).await.unwrap();
    // The label is read (set a) before the first switch.
    let deadline = Instant::now() + WAIT;
    while host.config_set().await.as_deref() != Some("a") {
        assert!(Instant::now() < deadline, "set a never served");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    kubelet
        .wait_registered("bench.example.com/fuse", 1, WAIT)
        .await
        .unwrap();

    // Admissions on the resource both sets share, back to back.
    let admitting = Arc::new(AtomicBool::new(true));
    let (made, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let admissions = {
        let (admitting, made, failed) = (admitting.clone(), made.clone(), failed.clone());
        let kubelet = Arc::new(kubelet);
        let for_task = kubelet.clone();
        let task = tokio::spawn(async move {
            while admitting.load(Ordering::Relaxed) {
                match for_task.admit("bench.example.com/fuse", 1).await {
                    Ok(admission) => {
                        made.fetch_add(1, Ordering::Relaxed);
                        // The container goes: its device is free again.
                        for_task.release("bench.example.com/fuse", &admission.devices);
                    }
                    Err(error) => {
                        if failed.fetch_add(1, Ordering::Relaxed) == 0 {
                            eprintln!("first failed admission: {error}");
                        }
                    }
                };
            }
        });
        (kubelet, task)
    };
    let kubelet = admissions.0.clone();

    let mut samples = Vec::with_capacity(switches);
    for i in 0..switches {
        let (set, own) = if i % 2 == 0 {
            ("b", "bench.example.com/loop")
        } else {
            ("a", "bench.example.com/tun")
        };
        let before = kubelet
            .state()
            .plugins
            .get(own)
            .map_or(0, |p| p.registrations);
        let started = Instant::now();
        api.put_node(node(set));
        kubelet
            .wait_registered(own, before + 1, WAIT)
            .await
            .unwrap_or_else(|e| panic!("switch {i} to set {set}: {e}"));
        samples.push(started.elapsed());
    }
    admitting.store(false, Ordering::Relaxed);
    admissions.1.await.unwrap();
    let total: Duration = samples.iter().sum();
    let mean = total / u32::try_from(samples.len()).unwrap();
    println!(
        "label change -> new set serving ({switches} switches): p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms  mean {:.1} ms",
        percentile(&mut samples, 0.5).as_secs_f64() * 1e3,
        percentile(&mut samples, 0.99).as_secs_f64() * 1e3,
        samples.last().unwrap().as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
    );
    println!(
        "admissions on the shared resource meanwhile: {} made, {} failed; its registrations: {}",
        made.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        kubelet.state().plugins["bench.example.com/fuse"].registrations
    );
    host.shutdown().await;
}
