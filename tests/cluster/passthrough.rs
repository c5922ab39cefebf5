//! Tier 2, passthrough bound on demand against the real kube-scheduler:
//! the host serves the `vfio-dra` recipe (GPUs bound to vfio-pci when a
//! claim is allocated one) with the passthrough overlay's RBAC, the kernel
//! stand-in playing sysfs binding on a gpu-server fixture. The scheduler
//! allocates a claim, then waits in PreBind for the `PassthroughBound`
//! binding condition the slices name (KEP-5007): the pod is bound only
//! once the host bound the GPU's IOMMU group and wrote the condition. A GPU
//! the host refuses (the boot display) gets `PassthroughBindFailed` with
//! the reason, and its pod is not bound.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wdp_test_support::kernel_standin::KernelStandin;

use crate::api_server::{LONG, deploy, host_kubeconfig, layout, wait_published};
use crate::control_plane::ControlPlane;
use crate::node::Node;
use crate::scheduler::{create_schedulable_node, get_json};

const DRIVER: &str = "gpu-vm.example.com";
const CLASS: &str = "gpu-vm.example.com";
/// Two GPUs of the fixture, on IOMMU groups of their own.
const GPU_A: &str = "0000:03:00.0";
const GPU_B: &str = "0000:04:00.0";

/// A pod on `node` whose one claim (from a template) asks for the GPU at
/// PCI address `address`.
fn pod_and_template(name: &str, node: &str, address: &str) -> [Value; 2] {
    let template = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": CLASS,
            "selectors": [{"cel": {"expression": format!(
                "device.attributes['resource.kubernetes.io'].pciBusID == '{address}'"
            )}}],
        }}]}}},
    });
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
            "containers": [{
                "name": "vm", "image": "registry.invalid/vm:1",
                "resources": {"claims": [{"name": "gpu"}]},
            }],
        },
    });
    [template, pod]
}

/// The claim the pod's status names (from its template).
fn claim_name(plane: &ControlPlane, pod: &str) -> Option<String> {
    let pod = get_json(plane, &["pod", "-n", "default", pod]);
    pod["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        .as_str()
        .map(str::to_owned)
}

/// The condition `type_` of the claim's device status, if written.
fn condition(claim: &Value, type_: &str) -> Option<Value> {
    claim["status"]["devices"]
        .as_array()?
        .iter()
        .flat_map(|d| d["conditions"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == type_)
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn the_scheduler_binds_the_pod_only_once_the_host_bound_its_gpu_to_vfio_pci() {
    let mut plane = ControlPlane::start().await;
    // The passthrough overlay: the DRA RBAC plus list/watch of claims, and
    // the DeviceClass `gpu-vm.example.com`.
    deploy(&plane, "kustomize-overlays-passthrough.pypi-1.37.yaml").await;
    plane.admin_service_account("default", "default").await;
    plane.start_scheduler();
    plane.start_controller_manager("resourceclaim-controller");

    let name = "vm-node";
    let node = Node::from_fixture(name, "gpu-server");
    // GPU B drives the console: the host must never take it.
    std::fs::write(
        node.root()
            .join(format!("sys/bus/pci/devices/{GPU_B}/boot_vga")),
        "1\n",
    )
    .unwrap();
    let kernel = KernelStandin::start(&node.root());
    node.install_config("config/examples/vfio-dra");
    create_schedulable_node(&plane, name).await;
    let kubeconfig = host_kubeconfig(&plane, "wasm-device-plugin", name).await;
    let host = node.spawn_host(&kubeconfig, &[]);
    let (devices, _) = layout(&node);
    let slices = wait_published(&plane, &host, name, DRIVER, &devices).await;
    // The real server kept the binding conditions the host published.
    let published: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect();
    assert_eq!(published.len(), devices.len());
    for device in published {
        assert_eq!(
            device.binding_conditions.as_deref(),
            Some(&["PassthroughBound".to_owned()][..]),
            "{device:?}"
        );
    }
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));

    let scratch = node.tmp.path().join("objects.json");
    let mut objects = pod_and_template("vm-a", name, GPU_A).to_vec();
    objects.extend(pod_and_template("vm-b", name, GPU_B));
    std::fs::write(
        &scratch,
        json!({"apiVersion": "v1", "kind": "List", "items": objects}).to_string(),
    )
    .unwrap();
    plane.kubectl(&["apply", "-f", scratch.to_str().unwrap()]);

    // vm-a: allocated, held in PreBind until the condition holds, then bound.
    let started = Instant::now();
    let (pod, claim) = loop {
        let pod = get_json(&plane, &["pod", "-n", "default", "vm-a"]);
        if pod["spec"]["nodeName"].is_string() {
            let claim_name = claim_name(&plane, "vm-a").unwrap();
            let claim = get_json(&plane, &["resourceclaim", "-n", "default", &claim_name]);
            break (pod, claim);
        }
        assert!(
            started.elapsed() < 2 * LONG,
            "vm-a never bound: {:#}\n{}\n{}\n{}",
            pod["status"],
            plane.kubectl(&["get", "events", "-A"]),
            host.log(),
            plane.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(pod["spec"]["nodeName"], name);
    let bound = condition(&claim, "PassthroughBound").unwrap_or_else(|| panic!("{claim:#}"));
    assert_eq!(bound["status"], "True", "{claim:#}");
    // By the time the pod was bound, the GPU's group was on vfio-pci.
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    assert!(node.root().join("dev/vfio/13").exists());
    let events = plane.kubectl(&["get", "events", "-n", "default"]);
    assert!(events.contains("BindingConditionsPending"), "{events}");

    // vm-b: the boot display. The host refuses, the claim says why, the
    // scheduler does not bind the pod, and the GPU stays where it was.
    let started = Instant::now();
    let failed = loop {
        let claim = claim_name(&plane, "vm-b")
            .map(|n| get_json(&plane, &["resourceclaim", "-n", "default", &n]));
        if let Some(failed) = claim
            .as_ref()
            .and_then(|c| condition(c, "PassthroughBindFailed"))
        {
            break failed;
        }
        assert!(
            started.elapsed() < LONG,
            "vm-b's claim never failed: {claim:#?}\n{}",
            host.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(failed["status"], "True");
    assert_eq!(failed["reason"], "RefusedByHost");
    let message = failed["message"].as_str().unwrap();
    assert!(message.contains("boot display"), "{message}");
    // The scheduler reads the failure condition (it polls every 5 s) and
    // gives the allocation up, saying why, instead of binding the pod.
    let started = Instant::now();
    loop {
        let events = plane.kubectl(&[
            "get",
            "events",
            "-n",
            "default",
            "--field-selector",
            "involvedObject.name=vm-b",
        ]);
        if events.contains("device binding failed") {
            assert!(events.contains("RefusedByHost"), "{events}");
            break;
        }
        assert!(
            started.elapsed() < LONG,
            "the scheduler never gave vm-b's allocation up: {events}\n{}",
            plane.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pod = get_json(&plane, &["pod", "-n", "default", "vm-b"]);
    assert!(pod["spec"]["nodeName"].is_null(), "{pod:#}");
    assert_eq!(kernel.driver(GPU_B).as_deref(), Some("nvidia"));
}
