//! Tier 2: the real kube-scheduler and kube-controller-manager allocate
//! ResourceClaims (from templates, and the special claim of an extended
//! resource request) on the slices the host published, and the claims they
//! wrote are what the host prepares (through the DRA kubelet stand-in until
//! a real kubelet runs here).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as NodeObject;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet};

use crate::api_server::{
    LONG, create_node, deploy, device_names, host_kubeconfig, layout, slices, wait_published,
};
use crate::control_plane::ControlPlane;
use crate::node::{HostProcess, Node};

const DRIVER: &str = "gpu.example.com";

/// A node of the gpu-server fixture running the GPU partitions recipe
/// (`edit` applied to its resource file), registered with the API server
/// as a schedulable node, its simulated DRA kubelet and its host, once the
/// server holds every device the host says it publishes.
struct GpuNode {
    node: Node,
    kubelet: SimDraKubelet,
    host: HostProcess,
}

impl GpuNode {
    async fn start(plane: &ControlPlane, name: &str, edit: impl Fn(String) -> String) -> Self {
        let node = Node::from_fixture(name, "gpu-server");
        // What NVIDIA's driver offers under each GPU to make and remove
        // partitions (the guest writes a partition's ID to create it).
        for gpu in gpus(&node) {
            std::fs::write(gpu.join("partition_create"), "").unwrap();
            std::fs::write(gpu.join("partition_remove"), "").unwrap();
        }
        node.install_config("config/examples/gpu-partitions-dra");
        let gpu = node.config().join("gpu.toml");
        std::fs::write(&gpu, edit(std::fs::read_to_string(&gpu).unwrap())).unwrap();
        create_schedulable_node(plane, name).await;
        let kubelet = SimDraKubelet::start(node.registry(), DraSimOptions::default())
            .await
            .unwrap();
        let kubeconfig = host_kubeconfig(plane, "wasm-device-plugin", name).await;
        let host = node.spawn_host(&kubeconfig, &[]);
        let (devices, _) = layout(&node);
        wait_published(plane, &host, name, DRIVER, &devices).await;
        Self {
            node,
            kubelet,
            host,
        }
    }

    /// Prepares `claim` (a ResourceClaim object) through the DRA kubelet
    /// stand-in; returns the CDI device IDs the host answered for its
    /// devices, after checking that the device metadata mount (KEP-5304)
    /// of its one request is answered with them.
    async fn prepare(&self, claim: &Value) -> Vec<String> {
        let meta = &claim["metadata"];
        let reference = ClaimRef::new(
            meta["namespace"].as_str().unwrap(),
            meta["name"].as_str().unwrap(),
            meta["uid"].as_str().unwrap(),
        );
        let outcome = self
            .kubelet
            .prepare(DRIVER, std::slice::from_ref(&reference))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.host.log()));
        let devices = outcome.claims[&reference.uid]
            .clone()
            .unwrap_or_else(|e| panic!("{e}\n{}", self.host.log()));
        let (mounts, ids): (Vec<String>, Vec<String>) = devices
            .iter()
            .inspect(|d| assert_eq!(d.pool_name, self.node.name))
            .flat_map(|d| d.cdi_device_ids.clone())
            .partition(|id| id.contains(&format!("={}_metadata_", reference.uid)));
        assert_eq!(mounts.len(), 1, "{mounts:?}\n{}", self.host.log());
        ids
    }
}

/// Creates Node `name` (labelled with its hostname) with what a kubelet
/// reports: room for pods, nothing else (GPUs are DRA devices;
/// `nvidia.com/gpu` only through the extended-resource DeviceClass).
pub(crate) async fn create_schedulable_node(plane: &ControlPlane, name: &str) {
    create_node(&plane.admin, name, json!({"kubernetes.io/hostname": name})).await;
    let room = json!({"cpu": "16", "memory": "64Gi", "pods": "110"});
    Api::<NodeObject>::all(plane.admin.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"capacity": room, "allocatable": room}})),
        )
        .await
        .unwrap();
}

/// The sysfs folders of the node's NVIDIA GPUs (vendor 0x10de, class
/// 0x0302).
fn gpus(node: &Node) -> Vec<std::path::PathBuf> {
    let devices = node.root().join("sys/bus/pci/devices");
    let read = |dir: &std::path::Path, file: &str| {
        std::fs::read_to_string(dir.join(file)).unwrap_or_default()
    };
    std::fs::read_dir(devices)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|dir| read(dir, "vendor").trim() == "0x10de")
        .filter(|dir| read(dir, "class").trim().starts_with("0x0302"))
        .collect()
}

/// `kubectl get -o json` of one object.
pub(crate) fn get_json(plane: &ControlPlane, args: &[&str]) -> Value {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&plane.kubectl(&all)).unwrap()
}

/// Applies `objects` (JSON) with kubectl.
fn apply(plane: &ControlPlane, dir: &std::path::Path, name: &str, objects: &[Value]) {
    let path = dir.join(format!("{name}.json"));
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(&path, list.to_string()).unwrap();
    plane.kubectl(&["apply", "-f", path.to_str().unwrap()]);
}

/// A pod on node `node` (by its hostname label) with `claims` (claim name
/// → template name) and the container's resource `limits`; it tolerates
/// every taint (no node lifecycle runs here to clear `not-ready`).
fn pod(name: &str, node: &str, templates: &[(&str, &str)], limits: Value) -> Value {
    let claims: Vec<Value> = templates
        .iter()
        .map(|(claim, template)| json!({"name": claim, "resourceClaimTemplateName": template}))
        .collect();
    let uses: Vec<Value> = templates
        .iter()
        .map(|(claim, _)| json!({"name": claim}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": claims,
            "containers": [{
                "name": "work", "image": "registry.invalid/work:1",
                "resources": {"claims": uses, "limits": limits},
            }],
        },
    })
}

/// A ResourceClaimTemplate of one exact request of the DeviceClass
/// `gpu.example.com`, with a CEL `selector` and optional `capacity`.
fn template(name: &str, selector: &str, capacity: Option<Value>) -> Value {
    let mut exactly = json!({
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": selector}}],
    });
    if let Some(capacity) = capacity {
        exactly["capacity"] = json!({"requests": capacity});
    }
    json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    })
}

/// Waits until pod `name` is bound to a node; returns the pod.
async fn scheduled(plane: &ControlPlane, name: &str) -> Value {
    let started = Instant::now();
    loop {
        let pod = get_json(plane, &["pod", "-n", "default", name]);
        if pod["spec"]["nodeName"].is_string() {
            return pod;
        }
        assert!(
            started.elapsed() < LONG,
            "pod {name} never scheduled: {:#}\n{}\n{}",
            pod["status"],
            plane.kubectl(&["get", "events", "-A"]),
            plane.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The ResourceClaim the pod's status names for `claim` (from a
/// template), or its extended-resource claim when `claim` is `None`.
fn claim_of(plane: &ControlPlane, pod: &Value, claim: Option<&str>) -> Value {
    let status = &pod["status"];
    let name = match claim {
        Some(claim) => status["resourceClaimStatuses"]
            .as_array()
            .and_then(|all| all.iter().find(|s| s["name"] == claim))
            .and_then(|s| s["resourceClaimName"].as_str()),
        None => status["extendedResourceClaimStatus"]["resourceClaimName"].as_str(),
    }
    .unwrap_or_else(|| panic!("no claim {claim:?} in {status:#}"));
    get_json(plane, &["resourceclaim", "-n", "default", name])
}

/// The devices of a claim's allocation: (pool, device) pairs.
fn allocated(claim: &Value) -> Vec<(String, String)> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("claim not allocated: {claim:#}"))
        .iter()
        .inspect(|r| assert_eq!(r["driver"], DRIVER, "{claim:#}"))
        .map(|r| {
            (
                r["pool"].as_str().unwrap().to_owned(),
                r["device"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn the_real_scheduler_allocates_on_the_hosts_slices_and_the_host_prepares_it() {
    let mut plane = ControlPlane::start().await;
    // The DRA overlay: RBAC, and the DeviceClasses `gpu.example.com` and
    // `gpu.example.com-extended` (nvidia.com/gpu through DRA, KEP-5004).
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    plane.admin_service_account("default", "default").await;
    plane.start_scheduler();
    plane.start_controller_manager("resourceclaim-controller");
    let whole = GpuNode::start(&plane, "gpu-whole", |text| text).await;
    let shared = GpuNode::start(&plane, "gpu-shared", |text| {
        text.replace("[guest-config]\n", "[guest-config]\nshare = \"memory\"\n")
    })
    .await;

    let whole_gpu = "!('profile' in device.attributes['gpu.example.com'])";
    let scratch = whole.node.tmp.path();
    apply(
        &plane,
        scratch,
        "templates",
        &[
            template("whole-gpu", whole_gpu, None),
            template(
                "partition-3g",
                // Optional: whole GPUs have no `profile`, and a selector
                // that errors on a device fails the pod's scheduling.
                "device.attributes['gpu.example.com'].?profile.orValue('') == '3g.40gb'",
                None,
            ),
            template("share-20g", whole_gpu, Some(json!({"memory": "20Gi"}))),
        ],
    );
    apply(
        &plane,
        scratch,
        "pods",
        &[
            pod("whole", "gpu-whole", &[("gpu", "whole-gpu")], json!({})),
            pod(
                "partition",
                "gpu-whole",
                &[("gpu", "partition-3g")],
                json!({}),
            ),
            pod("share", "gpu-shared", &[("gpu", "share-20g")], json!({})),
            pod("extended", "gpu-whole", &[], json!({"nvidia.com/gpu": "1"})),
        ],
    );

    // A whole GPU: a device with no partition attribute, on the node.
    let pod_whole = scheduled(&plane, "whole").await;
    let claim = claim_of(&plane, &pod_whole, Some("gpu"));
    let devices = allocated(&claim);
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].0, "gpu-whole");
    let ids = whole.prepare(&claim).await;
    assert_eq!(ids.len(), 1, "{ids:?}");

    // A partition, drawing on its GPU's counters: the guest creates it.
    let pod_partition = scheduled(&plane, "partition").await;
    let claim = claim_of(&plane, &pod_partition, Some("gpu"));
    let partition = allocated(&claim).remove(0).1;
    assert!(partition.contains("3g-40gb"), "{partition}");
    let ids = whole.prepare(&claim).await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    let created: Vec<String> = gpus(&whole.node)
        .iter()
        .map(|gpu| std::fs::read_to_string(gpu.join("partition_create")).unwrap())
        .filter(|written| !written.is_empty())
        .collect();
    assert_eq!(created, [partition], "{}", whole.host.log());

    // A capacity share of a GPU several claims may use.
    let pod_share = scheduled(&plane, "share").await;
    let claim = claim_of(&plane, &pod_share, Some("gpu"));
    assert_eq!(allocated(&claim)[0].0, "gpu-shared");
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(result["consumedCapacity"]["memory"], "20Gi", "{claim:#}");
    shared.prepare(&claim).await;

    // `nvidia.com/gpu: 1` through the extended-resource DeviceClass.
    let pod_extended = scheduled(&plane, "extended").await;
    let claim = claim_of(&plane, &pod_extended, None);
    assert_eq!(allocated(&claim)[0].0, "gpu-whole");
    whole.prepare(&claim).await;

    // The scheduler chose among what the server holds: still every device.
    assert!(!device_names(&slices(&plane.admin, "gpu-whole", DRIVER).await).is_empty());
    for node in [&whole, &shared] {
        assert!(node.host.problems().is_empty(), "{}", node.host.log());
    }
}
