//! ResourceSlices following a resource's device set, through the real kube
//! client against the in-repo fake API server: names, typed attributes and
//! numaNode; a health change becomes a taint and its recovery removes it;
//! an unchanged set writes nothing; a wiped pool comes back; a refusing API
//! server shows in the status and metrics; stop leaves the slices, withdraw
//! deletes them.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceSlice;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{PoolTarget, SlicePublisher};
use wdp_dra_driver::DraMetrics;
use wdp_dra_driver::SliceSync;
use wdp_fake_apiserver::FakeApiServer;
use wdp_k8s_naming as naming;
use wdp_kubelet_socket::KubeletMetrics;
use wdp_policy::types::Device;
use wdp_resource::SharedDeviceSet;

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "node-a";
const PATIENCE: Duration = Duration::from_secs(20);

fn gpu(id: &str, numa: i64) -> Device {
    Device {
        id: id.into(),
        candidates: vec![id.into()],
        numa_nodes: vec![numa],
        attributes: vec![
            ("pci.vendor".into(), "0x10de".into()),
            ("memory-mib".into(), "81920".into()),
            ("driver.version".into(), "550.54.15".into()),
        ],
        replicas: 0,
    }
}

fn device_set(unhealthy: &[(&str, &str)]) -> SharedDeviceSet {
    let devices = [gpu("0000:3b:00.0", 0), gpu("0000:af:00.0", 1)];
    crate::common::device_set_of(&devices, unhealthy)
}

/// The DRA families in a registry of their own, as the host registers
/// them.
struct Metrics {
    registry: Registry,
    dra: Arc<DraMetrics>,
}

impl Metrics {
    fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("wasm_device_plugin");
        let kubelet = KubeletMetrics::register(&mut registry, wdp_resource::latency_histogram);
        let dra = DraMetrics::register(&mut registry, kubelet);
        Arc::new(Self { registry, dra })
    }

    fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }
}

struct Setup {
    server: FakeApiServer,
    devices: watch::Sender<SharedDeviceSet>,
    sync: SliceSync,
    metrics: Arc<Metrics>,
    _dir: tempfile::TempDir,
}

async fn setup() -> Setup {
    let server = FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    // Two TLS providers end up linked into the test binary; pick kube's.
    wdp_dra_client::install_tls_provider();
    let client = wdp_dra_client::client(Some(&kubeconfig)).await.unwrap();
    let start_publisher = Box::new(move || {
        SlicePublisher::spawn(
            client.clone(),
            PoolTarget::new(DRIVER, NODE),
            CancellationToken::new(),
        )
    });
    let (devices, receiver) = watch::channel(device_set(&[]));
    let metrics = Metrics::new();
    // The only instance: it always publishes.
    let (_, leading) = watch::channel(true);
    let sync = SliceSync::start(
        DRIVER,
        receiver,
        start_publisher,
        (leading, Box::new(|| None)),
        metrics.dra.clone(),
    );
    Setup {
        server,
        devices,
        sync,
        metrics,
        _dir: dir,
    }
}

fn devices_of(slices: &[ResourceSlice]) -> Vec<k8s_openapi::api::resource::v1::Device> {
    slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(NODE) && s.spec.driver == DRIVER)
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .collect()
}

fn tainted(slices: &[ResourceSlice]) -> Vec<String> {
    devices_of(slices)
        .into_iter()
        .filter(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
        .map(|d| d.name)
        .collect()
}

async fn wait(server: &FakeApiServer, what: &str, pred: impl Fn(&[ResourceSlice]) -> bool) {
    if let Err(timeout) = server.wait_for_slices(pred, PATIENCE).await {
        panic!("{what}: {timeout:?}");
    }
}

async fn wait_status(
    sync: &SliceSync,
    what: &str,
    pred: impl Fn(&wdp_dra_client::PublishStatus) -> bool,
) {
    let mut status = sync.status();
    tokio::time::timeout(PATIENCE, status.wait_for(|s| pred(s)))
        .await
        .unwrap_or_else(|_| panic!("{what}: {:?}", *sync.status().borrow()))
        .unwrap();
}

/// Waits until `series` is in the exposition with a value `accept`s. The
/// metrics follow the publisher's status a moment after it changes;
/// nothing signals that moment, so this looks every 10 ms.
async fn wait_metric(metrics: &Metrics, series: &str, accept: impl Fn(f64) -> bool) {
    let value = || {
        metrics.encode().lines().find_map(|line| {
            line.strip_prefix(series)?
                .strip_prefix(' ')?
                .parse::<f64>()
                .ok()
        })
    };
    tokio::time::timeout(PATIENCE, async {
        while !value().is_some_and(&accept) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{series} is {:?} in {}", value(), metrics.encode()));
}

#[tokio::test]
async fn slices_follow_the_device_set() {
    let Setup {
        server,
        devices,
        sync,
        metrics,
        _dir,
    } = setup().await;

    // The device set as named, typed devices with their NUMA node.
    wait(&server, "both devices published", |s| {
        devices_of(s).len() == 2
    })
    .await;
    let published = devices_of(&server.slices_of(NODE, DRIVER));
    let first = naming::device_name("0000:3b:00.0").unwrap();
    let second = naming::device_name("0000:af:00.0").unwrap();
    let names: Vec<&str> = published.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, [first.as_str(), second.as_str()]);
    let attributes = published[1].attributes.clone().unwrap();
    let attribute = |key: &str| {
        attributes
            .get(key)
            .unwrap_or_else(|| panic!("{key} missing from {attributes:?}"))
            .clone()
    };
    assert_eq!(attribute("resource.kubernetes.io/numaNode").int, Some(1));
    assert_eq!(
        attribute("gpu.example.com/pci_vendor").string.as_deref(),
        Some("0x10de")
    );
    assert_eq!(attribute("gpu.example.com/memory_mib").int, Some(81920));
    assert_eq!(
        attribute("gpu.example.com/driver_version")
            .version
            .as_deref(),
        Some("550.54.15")
    );
    assert!(tainted(&server.slices()).is_empty());
    wait_status(&sync, "published status", |s| s.published.is_some()).await;
    assert!(sync.is_published());
    let generation = sync
        .status()
        .borrow()
        .published
        .as_ref()
        .unwrap()
        .generation;

    // Hot-unplug: the unhealthy device carries the driver's taint.
    devices.send_replace(device_set(&[("0000:af:00.0", "fell off the bus")]));
    wait(&server, "taint published", |s| {
        tainted(s) == [second.clone()]
    })
    .await;
    let taint = devices_of(&server.slices_of(NODE, DRIVER))[1]
        .taints
        .clone()
        .unwrap()
        .remove(0);
    assert_eq!(taint.key, "gpu.example.com/unhealthy");
    assert_eq!(taint.value.as_deref(), Some("fell-off-the-bus"));
    assert_eq!(taint.effect, "NoSchedule");
    wait_status(&sync, "generation bumped", |s| {
        s.published
            .as_ref()
            .is_some_and(|p| p.generation > generation)
    })
    .await;

    // An equal set writes nothing: after it, a real change costs exactly
    // one slice write (the pool fits one slice).
    devices.send_replace(device_set(&[("0000:af:00.0", "fell off the bus")]));
    let before = server.stats();
    devices.send_replace(device_set(&[]));
    wait(&server, "taint removed on recovery", |s| {
        tainted(s).is_empty() && devices_of(s).len() == 2
    })
    .await;
    let after = server.stats();
    assert_eq!(
        (after.slice_creates + after.slice_updates) - (before.slice_creates + before.slice_updates),
        1,
        "{before:?} -> {after:?}"
    );

    // The kubelet wipes the node's slices at start: they come back.
    assert!(server.wipe_node_slices(NODE, None) > 0);
    wait(&server, "slices back after a wipe", |s| {
        devices_of(s).len() == 2
    })
    .await;

    // Metrics carry the published generation.
    wait_status(&sync, "published after the wipe", |s| {
        s.published.is_some() && s.error.is_none()
    })
    .await;
    let text = metrics.encode();
    assert!(
        text.contains("wasm_device_plugin_dra_published_generation{driver=\"gpu.example.com\"}"),
        "{text}"
    );
    // and count every slice write the API server saw.
    let stats = server.stats();
    let written = stats.slice_creates + stats.slice_updates + stats.slice_deletes;
    // The last pass's writes reach the server before its status does.
    wait_metric(
        &metrics,
        &format!("wasm_device_plugin_dra_slice_writes_total{{driver=\"{DRIVER}\"}}"),
        |value| value == written as f64,
    )
    .await;

    // Clean stop leaves the slices in place.
    sync.stop().await;
    assert_eq!(devices_of(&server.slices_of(NODE, DRIVER)).len(), 2);
}

#[tokio::test]
async fn a_refusing_api_server_shows_in_status_and_metrics_then_withdraw_deletes() {
    let Setup {
        server,
        devices,
        sync,
        metrics,
        _dir,
    } = setup().await;
    wait(&server, "published", |s| devices_of(s).len() == 2).await;
    wait_status(&sync, "published status", |s| s.published.is_some()).await;

    server.set_refusing(true);
    devices.send_replace(device_set(&[("0000:3b:00.0", "gone")]));
    wait_status(&sync, "error reported", |s| s.error.is_some()).await;
    assert!(!sync.is_published());
    let error = sync.status().borrow().error.clone().unwrap();
    assert!(error.contains(DRIVER), "{error}");
    wait_metric(
        &metrics,
        "wasm_device_plugin_dra_slice_publish_errors_total{driver=\"gpu.example.com\"}",
        |failures| failures >= 1.0,
    )
    .await;

    server.set_refusing(false);
    wait(&server, "published once the server answers again", |s| {
        tainted(s).len() == 1
    })
    .await;
    wait_status(&sync, "error cleared", |s| s.error.is_none()).await;

    let deleted = sync.withdraw().await.unwrap();
    assert!(deleted >= 1);
    assert!(server.slices_of(NODE, DRIVER).is_empty());
}
