//! Tier 1, handovers against the real API server: a rolling update (two
//! instances side by side, one publisher at any moment) and a resource
//! moved from the device plugin to DRA while a container holds one of its
//! devices (that device is never in a ResourceSlice until the container
//! ends). What the server held is recorded by a watch of its slices.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::runtime::watcher;
use serde_json::json;
use wdp_kubelet_sim::{DraSimOptions, SimDraKubelet, SimKubelet};

use crate::api_server::{
    LONG, create_node, deploy, device_names, host_kubeconfig, requests_rbac_denies, slices,
};
use crate::control_plane::ControlPlane;
use crate::node::{HostProcess, Node};

const RESOURCE: &str = "cluster.example.com/hot";
const DRIVER: &str = "hot.cluster.example.com";

/// Every device set the server held for `driver` on `node`, in order, as
/// its watch told them (a change of set is one entry).
struct SliceHistory {
    sets: Arc<Mutex<Vec<BTreeSet<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SliceHistory {
    fn watch(plane: &ControlPlane, node: &str, driver: &str) -> Self {
        let api: Api<ResourceSlice> = Api::all(plane.admin.clone());
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={node},spec.driver={driver}"));
        let sets: Arc<Mutex<Vec<BTreeSet<String>>>> = Arc::default();
        let recorded = sets.clone();
        let task = tokio::spawn(async move {
            let mut held: std::collections::BTreeMap<String, ResourceSlice> = Default::default();
            let mut events = watcher(api, config).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(slice) | watcher::Event::InitApply(slice)) => {
                        held.insert(slice.metadata.name.clone().unwrap_or_default(), slice);
                    }
                    Ok(watcher::Event::Delete(slice)) => {
                        held.remove(slice.metadata.name.as_deref().unwrap_or_default());
                    }
                    Ok(watcher::Event::Init) => held.clear(),
                    Ok(watcher::Event::InitDone) | Err(_) => continue,
                }
                let now: Vec<ResourceSlice> = held.values().cloned().collect();
                let set = device_names(&now);
                let mut sets = recorded.lock().unwrap();
                if sets.last() != Some(&set) {
                    sets.push(set);
                }
            }
        });
        Self { sets, task }
    }

    /// The sets recorded since the first device was held (the watch may
    /// start before anything is published: an empty set first is no gap).
    fn sets(&self) -> Vec<BTreeSet<String>> {
        let sets = self.sets.lock().unwrap();
        let first = sets
            .iter()
            .position(|s| !s.is_empty())
            .unwrap_or(sets.len());
        sets[first..].to_vec()
    }

    /// Waits until the latest set recorded is `devices`.
    async fn wait_for(&self, devices: &[&str], host: &HostProcess) {
        let want: BTreeSet<String> = devices.iter().map(|d| (*d).to_owned()).collect();
        let started = Instant::now();
        while self.sets().last() != Some(&want) {
            assert!(
                started.elapsed() < LONG,
                "the server never held {want:?}; it held, in order: {:?}\n{}",
                self.sets(),
                host.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for SliceHistory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn set(devices: &[&str]) -> BTreeSet<String> {
    devices.iter().map(|d| (*d).to_owned()).collect()
}

fn hot_node(name: &str, api: &str) -> Node {
    let node = Node::new(name);
    node.add_device_node("/dev/hot0");
    node.add_device_node("/dev/hot1");
    node.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    node.write_config("hot.toml", &hot_config(api, "/dev/hot*"));
    node
}

fn hot_config(api: &str, nodes: &str) -> String {
    let api = match api {
        "dra" => format!("api = \"dra\"\ndriver = \"{DRIVER}\"\n"),
        _ => String::new(),
    };
    format!("version = 1\nresource = \"{RESOURCE}\"\n{api}[[nodes]]\npath = \"{nodes}\"\n")
}

/// Two pods of the host side by side on one node (`--instance-id`, as a
/// DaemonSet's rolling update with maxSurge runs them): the newer one
/// publishes, the older yields without a write, and the server's slices
/// change exactly once per handover.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn a_rolling_update_has_one_publisher_against_the_real_server() {
    let plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    let node = hot_node("node-upgrade", "dra");
    create_node(&plane.admin, "node-upgrade", json!({})).await;
    let kubelet = SimDraKubelet::start(node.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let kubeconfig = host_kubeconfig(&plane, "wasm-device-plugin", "node-upgrade").await;
    let history = SliceHistory::watch(&plane, "node-upgrade", DRIVER);

    let mut old = node.spawn_host(&kubeconfig, &["--instance-id", "pod-old"]);
    history.wait_for(&["hot0", "hot1"], &old).await;

    // The new pod's configuration serves hot1 only.
    let new_config = node.tmp.path().join("config-new");
    std::fs::create_dir_all(&new_config).unwrap();
    std::fs::copy(
        node.config().join("host.toml"),
        new_config.join("host.toml"),
    )
    .unwrap();
    std::fs::write(new_config.join("hot.toml"), hot_config("dra", "/dev/hot1")).unwrap();
    let new = node.spawn_host_reading(&new_config, &kubeconfig, &["--instance-id", "pod-new"]);
    history.wait_for(&["hot1"], &new).await;
    old.wait_for_log(
        "a newer instance of the host publishes the ResourceSlices now",
        LONG,
    )
    .await;
    old.terminate().await;
    // The old pod's exit leaves the new one's slices alone.
    kubelet
        .wait_for("the old instance to deregister", LONG, |s| {
            s.standby.is_empty()
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}", kubelet.state()));
    assert_eq!(
        device_names(&slices(&plane.admin, "node-upgrade", DRIVER).await),
        set(&["hot1"])
    );
    assert_eq!(
        history.sets(),
        [set(&["hot0", "hot1"]), set(&["hot1"])],
        "{}",
        new.log()
    );
    assert_eq!(
        requests_rbac_denies(&plane, "wasm-device-plugin"),
        Vec::<String>::new()
    );
}

/// The resource's file moves it from the device plugin to DRA while a
/// container holds hot0: the server never holds hot0 until the container
/// ends, then holds both.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn a_device_held_through_the_device_plugin_is_never_published_until_released() {
    let plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    let node = hot_node("node-switch", "device-plugin");
    create_node(&plane.admin, "node-switch", json!({})).await;
    let kubeconfig = host_kubeconfig(&plane, "wasm-device-plugin", "node-switch").await;
    let kubelet = SimKubelet::start(node.plugins()).await.unwrap();
    let pod_resources = kubelet
        .serve_pod_resources(node.tmp.path().join("pod-resources/kubelet.sock"))
        .unwrap();
    let _dra = SimDraKubelet::start(node.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let socket = pod_resources.socket().to_str().unwrap().to_owned();
    let host = node.spawn_host(
        &kubeconfig,
        &[
            "--registration",
            "kubelet",
            "--pod-resources-socket",
            &socket,
        ],
    );
    kubelet
        .wait_registered(RESOURCE, 1, LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", host.log()));
    let admission = kubelet.admit(RESOURCE, 1).await.unwrap();
    assert_eq!(admission.devices, ["hot0"]);

    let history = SliceHistory::watch(&plane, "node-switch", DRIVER);
    node.write_config("hot.toml", &hot_config("dra", "/dev/hot*"));
    history.wait_for(&["hot1"], &host).await;
    assert!(kubelet.end_pod(&admission.pod));
    history.wait_for(&["hot0", "hot1"], &host).await;
    // hot0 appeared only after the container ended: never before.
    let sets = history.sets();
    let first_with_hot0 = sets.iter().position(|s| s.contains("hot0")).unwrap();
    assert_eq!(first_with_hot0, sets.len() - 1, "{sets:?}");
    assert_eq!(
        requests_rbac_denies(&plane, "wasm-device-plugin"),
        Vec::<String>::new()
    );
}
