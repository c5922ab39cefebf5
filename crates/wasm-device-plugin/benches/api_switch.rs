//! A node moved from the device-plugin API to DRA and back by its
//! configuration-set label, with containers running, against the fake API
//! server, the simulated kubelet (device manager, PodResources, DRA side)
//! and the host in-process (`cargo bench -p wasm-device-plugin --bench
//! api_switch`). Per round, from the Node written with the other set's
//! name:
//!
//! - to DRA: the device plugin withdrawn (the kubelet sees every device
//!   `Unhealthy`: allocatable 0), DRA slices published (every device but
//!   the two containers hold), the first claim the scheduler writes for
//!   an extended-resource request prepared, and a device a container gave
//!   back published;
//! - back: the device plugin registered offering every device but the
//!   one the claim holds, and all of them once the claim is unprepared.
//!
//! Medians over `WDP_BENCH_ROUNDS` rounds (default 5); the two containers
//! admitted through the device plugin before the first round run
//! throughout and start again after every switch. Figures in
//! docs/api-switch.md.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use wdp_fake_apiserver::{ExtendedResourceRequest, FakeApiServer};
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};
use wdp_kubelet_api::v1beta1;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet, SimKubelet};

const LABEL: &str = "wasm-device-plugin.io/config";
const RESOURCE: &str = "bench.example.com/acc";
const DRIVER: &str = "acc.bench.example.com";
const NODE: &str = "bench-node";
const DEVICES: usize = 8;
const WAIT: Duration = Duration::from_secs(60);

fn node(value: &str) -> Node {
    let labels = BTreeMap::from([(LABEL.to_owned(), value.to_owned())]);
    serde_json::from_value(serde_json::json!({"metadata": {"name": NODE, "labels": labels}}))
        .unwrap()
}

fn median(samples: &mut [Duration]) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

async fn healthy(kubelet: &SimKubelet, count: usize) {
    kubelet
        .wait_devices(RESOURCE, WAIT, |devices| {
            devices
                .iter()
                .filter(|d| d.health == v1beta1::HEALTHY)
                .count()
                == count
        })
        .await
        .unwrap();
}

async fn wait_published(api: &FakeApiServer, count: usize) {
    api.wait_for_slices(
        |slices| {
            slices
                .iter()
                .filter(|s| s.spec.driver == DRIVER)
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
                == count
        },
        WAIT,
    )
    .await
    .unwrap();
}

fn write_config(path: &dyn Fn(&str) -> std::path::PathBuf) {
    for dir in [
        "root/dev",
        "config/sets/dp",
        "config/sets/dra",
        "plugins",
        "state",
    ] {
        std::fs::create_dir_all(path(dir)).unwrap();
    }
    for i in 0..DEVICES {
        std::fs::write(path(&format!("root/dev/acc{i}")), "").unwrap();
    }
    std::fs::write(
        path("config/host.toml"),
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    )
    .unwrap();
    let file = |api: &str| {
        format!("version = 1\nresource = \"{RESOURCE}\"\n{api}[[nodes]]\npath = \"/dev/acc*\"\n")
    };
    std::fs::write(path("config/sets/dp/acc.toml"), file("")).unwrap();
    std::fs::write(
        path("config/sets/dra/acc.toml"),
        file(&format!("api = \"dra\"\ndriver = \"{DRIVER}\"\n")),
    )
    .unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("WDP_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let tmp = tempfile::tempdir().unwrap();
    let path = |p: &str| tmp.path().join(p);
    write_config(&path);
    let api = FakeApiServer::start().await.unwrap();
    api.put_node(node("dp"));
    api.write_kubeconfig(&path("kubeconfig")).unwrap();
    let kubelet = SimKubelet::start(path("plugins")).await.unwrap();
    let _pod_resources = kubelet
        .serve_pod_resources(path("pod-resources/kubelet.sock"))
        .unwrap();
    let dra = SimDraKubelet::start(path("plugins_registry"), DraSimOptions::default())
        .await
        .unwrap();
    let options = HostOptions {
        config_dir: path("config"),
        device_plugin_dir: path("plugins"),
        host_root: path("root"),
        cdi_dir: path("cdi"),
        registration: wdp_kubelet_socket::RegistrationMode::Kubelet,
        plugins_registry_dir: path("plugins_registry"),
        plugins_dir: path("kubelet-plugins"),
        state_dir: path("state"),
        kubeconfig: Some(path("kubeconfig")),
        node_name: NODE.to_owned(),
        instance_id: None,
        pod_resources_socket: path("pod-resources/kubelet.sock"),
        serve_last_good: true,
    };
    let host = Host::start(options, Metrics::new()).await.unwrap();
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, DEVICES).await;
    let mut running = [
        kubelet.admit(RESOURCE, 1).await.unwrap(),
        kubelet.admit(RESOURCE, 1).await.unwrap(),
    ];

    let mut steps: BTreeMap<&str, Vec<Duration>> = BTreeMap::new();
    let mut restarts = 0;
    for round in 0..rounds {
        // To DRA.
        let started = Instant::now();
        api.put_node(node("dra"));
        healthy(&kubelet, 0).await;
        steps
            .entry("1 device plugin withdrawn")
            .or_default()
            .push(started.elapsed());
        wait_published(&api, DEVICES - running.len()).await;
        steps
            .entry("2 DRA slices published")
            .or_default()
            .push(started.elapsed());
        let claim = api
            .allocate_extended_resource(&ExtendedResourceRequest {
                namespace: "default".to_owned(),
                pod: format!("dra-pod-{round}"),
                pod_uid: format!("dra-pod-{round}-uid"),
                resource: RESOURCE.to_owned(),
                count: 1,
                device_class: DRIVER.to_owned(),
                driver: DRIVER.to_owned(),
                node: NODE.to_owned(),
            })
            .unwrap();
        let reference = ClaimRef::new(
            "default",
            claim.metadata.name.as_deref().unwrap(),
            claim.metadata.uid.as_deref().unwrap(),
        );
        let registered = round as u64 + 1;
        dra.wait_for("the driver to register", WAIT, |s| {
            s.drivers.contains_key(DRIVER)
                && s.registrations
                    .get(DRIVER)
                    .is_some_and(|&n| n >= registered)
        })
        .await
        .unwrap();
        let outcome = dra
            .prepare(DRIVER, std::slice::from_ref(&reference))
            .await
            .unwrap();
        outcome.claims[&reference.uid].clone().unwrap();
        steps
            .entry("3 first DRA claim prepared")
            .or_default()
            .push(started.elapsed());
        for pod in &running {
            kubelet.restart_container(&pod.pod).await.unwrap();
            restarts += 1;
        }
        // One of the two containers goes: its device is published.
        let released = Instant::now();
        kubelet.end_pod(&running[0].pod);
        wait_published(&api, DEVICES - running.len() + 1).await;
        steps
            .entry("4 a device given back published (from the pod's end)")
            .or_default()
            .push(released.elapsed());

        // Back to the device plugin: every device offered but the claim's.
        let started = Instant::now();
        api.put_node(node("dp"));
        healthy(&kubelet, DEVICES - 1).await;
        steps
            .entry("5 device plugin back, offering all but the claimed device")
            .or_default()
            .push(started.elapsed());
        dra.unprepare(DRIVER, std::slice::from_ref(&reference))
            .await
            .unwrap();
        api.delete_claim("default", &reference.name);
        healthy(&kubelet, DEVICES).await;
        steps
            .entry("6 every device offered after the claim is unprepared")
            .or_default()
            .push(started.elapsed());
        kubelet.restart_container(&running[1].pod).await.unwrap();
        restarts += 1;
        // A new container takes the place of the one that went.
        running[0] = kubelet.admit(RESOURCE, 1).await.unwrap();
    }
    println!(
        "API switch timeline, {rounds} rounds, {DEVICES} devices, median ms from the label change:"
    );
    for (step, samples) in &mut steps {
        println!("  {step}: {:.1}", median(samples));
    }
    println!(
        "containers started again through the device plugin meanwhile: {restarts}, violations seen by the kubelet: {}",
        kubelet.state().violations.len()
    );
    let _ = host.handovers().await;
    host.shutdown().await;
}
