//! Tier 1: the host against the real kube-apiserver, with the RBAC the
//! deployment manifests grant (rendered from `deploy/` by kustomize and
//! Helm, as `deploy/validate.sh` leaves them in `target/deploy/`) and a
//! ServiceAccount token the server issued.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node as NodeObject;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::control_plane::ControlPlane;
use crate::node::{HostProcess, Node, repo};

/// Generous: the API server, the host and the tests share two cores.
pub const LONG: Duration = Duration::from_secs(60);

/// The manifests `deploy/validate.sh` rendered: `WDP_DEPLOY_OUT`, or
/// `target/deploy/`.
fn rendered(name: &str) -> PathBuf {
    std::env::var("WDP_DEPLOY_OUT")
        .map_or_else(|_| repo().join("target/deploy"), PathBuf::from)
        .join(name)
}

/// Applies a rendered manifest (server-side apply: the real server
/// validates every object of it, the DaemonSet and DeviceClasses too).
pub async fn deploy(plane: &ControlPlane, manifest: &str) {
    let path = rendered(manifest);
    assert!(
        path.exists(),
        "{} is missing: deploy/validate.sh renders it",
        path.display()
    );
    // The Helm render has no Namespace object of its own.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(plane.admin.clone());
    if namespaces
        .get_opt("wasm-device-plugin")
        .await
        .unwrap()
        .is_none()
    {
        plane.kubectl(&["create", "namespace", "wasm-device-plugin"]);
    }
    plane.kubectl(&[
        "apply",
        "--server-side",
        "--force-conflicts",
        "-f",
        path.to_str().unwrap(),
    ]);
}

/// The credentials of the host on `node`: a token of the deployment's
/// ServiceAccount bound to its pod there, as the DaemonSet's.
pub async fn host_kubeconfig(plane: &ControlPlane, service_account: &str, node: &str) -> PathBuf {
    plane
        .pod_kubeconfig("wasm-device-plugin", service_account, node)
        .await
}

/// Creates the Node object `name` (as the kubelet would register it).
pub async fn create_node(admin: &Client, name: &str, labels: serde_json::Value) {
    let nodes: Api<NodeObject> = Api::all(admin.clone());
    let node: NodeObject = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
}

/// The ResourceSlices of `driver` on node `node`, as the server holds them.
pub async fn slices(admin: &Client, node: &str, driver: &str) -> Vec<ResourceSlice> {
    let api: Api<ResourceSlice> = Api::all(admin.clone());
    api.list(&ListParams::default().fields(&format!("spec.nodeName={node},spec.driver={driver}")))
        .await
        .unwrap()
        .items
}

pub fn device_names(slices: &[ResourceSlice]) -> BTreeSet<String> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect()
}

/// Waits until the server holds exactly `devices` for `driver` on `node`.
pub async fn wait_published(
    plane: &ControlPlane,
    host: &HostProcess,
    node: &str,
    driver: &str,
    devices: &BTreeSet<String>,
) -> Vec<ResourceSlice> {
    let started = Instant::now();
    loop {
        let held = slices(&plane.admin, node, driver).await;
        if &device_names(&held) == devices {
            return held;
        }
        assert!(
            started.elapsed() < LONG,
            "{driver} on {node}: the server holds {:?}, not {devices:?}\n{}\n{}",
            device_names(&held),
            host.log(),
            plane.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What `test` says the host publishes: the device names, and the slice
/// count on a 1.35+ server.
pub fn layout(node: &Node) -> (BTreeSet<String>, usize) {
    let out = node.test_output();
    let devices = out
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("device "))
        .filter_map(|rest| rest.split_once(':'))
        .filter(|(name, _)| !name.contains(' '))
        .map(|(name, _)| name.to_owned())
        .collect();
    let slices = out
        .lines()
        .find_map(|line| line.trim().strip_prefix("published on a 1.35+ server: "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no 1.35+ slice count in:\n{out}"));
    (devices, slices)
}

/// The host's requests (from the audit log) the server answered 400 or
/// 422: objects or requests it found invalid.
pub fn invalid_requests(plane: &ControlPlane, service_account: &str) -> Vec<String> {
    requests_of(plane, service_account)
        .into_iter()
        .filter(|event| matches!(event["responseStatus"]["code"].as_u64(), Some(400 | 422)))
        .map(|event| describe(&event))
        .collect()
}

/// Every kind of request the host's ServiceAccount made (verb, resource,
/// namespace) that its RBAC does not allow, as the server's own
/// authorizer answers `kubectl auth can-i` now. (A request refused at the
/// time for another reason, such as RBAC's caches not yet filled right
/// after an API server restart, is not one.)
pub fn requests_rbac_denies(plane: &ControlPlane, service_account: &str) -> Vec<String> {
    let user = format!("system:serviceaccount:wasm-device-plugin:{service_account}");
    let mut asked = BTreeSet::new();
    for event in requests_of(plane, service_account) {
        let object = &event["objectRef"];
        let Some(resource) = object["resource"].as_str() else {
            continue; // a non-resource URL (discovery, /version)
        };
        let mut resource = resource.to_owned();
        if let Some(sub) = object["subresource"].as_str() {
            resource = format!("{resource}/{sub}");
        }
        if let Some(group) = object["apiGroup"].as_str().filter(|g| !g.is_empty()) {
            resource = format!("{resource}.{group}");
        }
        let verb = event["verb"].as_str().unwrap_or_default().to_owned();
        let namespace = object["namespace"].as_str().unwrap_or_default().to_owned();
        asked.insert((verb, resource, namespace));
    }
    asked
        .into_iter()
        .filter(|(verb, resource, namespace)| {
            let mut args = vec![
                "auth",
                "can-i",
                verb.as_str(),
                resource.as_str(),
                "--as",
                &user,
            ];
            if !namespace.is_empty() {
                args.extend(["-n", namespace.as_str()]);
            }
            plane.kubectl_status(&args).trim() != "yes"
        })
        .map(|(verb, resource, namespace)| format!("{verb} {resource} (namespace {namespace:?})"))
        .collect()
}

fn requests_of(plane: &ControlPlane, service_account: &str) -> Vec<serde_json::Value> {
    let user = format!("system:serviceaccount:wasm-device-plugin:{service_account}");
    plane
        .audit_events()
        .into_iter()
        .filter(|event| event["user"]["username"] == user.as_str())
        .collect()
}

fn describe(event: &serde_json::Value) -> String {
    format!(
        "{} {} -> {} {}",
        event["verb"],
        event["requestURI"],
        event["responseStatus"]["code"],
        event["responseStatus"]["message"]
    )
}

/// Every shipped DRA configuration, on the hardware it is for, is published
/// as `test` shows it and accepted by the real server's validation, with the
/// RBAC of both renders (kustomize's DRA overlay, Helm's DRA values) and
/// nothing refused.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn every_shipped_dra_configuration_is_accepted_by_the_real_server() {
    let plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    deploy(&plane, "helm-wasm-device-plugin-dra-values.yaml").await;
    let (kustomize, helm) = ("wasm-device-plugin", "wdp-wasm-device-plugin");
    for (n, (config, fixture, driver, account)) in [
        (
            "config/dra-demo",
            None,
            "loop.wasm-device-plugin.io",
            kustomize,
        ),
        (
            "config/examples/gpu-partitions-dra",
            Some("gpu-server"),
            "gpu.example.com",
            helm,
        ),
        (
            "config/examples/sriov-dra",
            Some("sriov-nic"),
            "sriov.example.com",
            kustomize,
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("node-{n}");
        let node = match fixture {
            Some(fixture) => Node::from_fixture(&name, fixture),
            None => {
                let node = Node::new(&name);
                for minor in 4..8 {
                    node.add_device_node(&format!("/dev/loop{minor}"));
                }
                node
            }
        };
        node.install_config(config);
        let (devices, slice_count) = layout(&node);
        assert!(!devices.is_empty(), "{config}: no device");
        create_node(&plane.admin, &name, json!({})).await;
        let kubeconfig = host_kubeconfig(&plane, account, &name).await;
        let mut host = node.spawn_host(&kubeconfig, &[]);
        let published = wait_published(&plane, &host, &name, driver, &devices).await;
        assert_eq!(published.len(), slice_count, "{config}: {published:#?}");
        host.terminate().await;
        assert!(host.problems().is_empty(), "{config}:\n{}", host.log());
    }
    for account in ["wasm-device-plugin", "wdp-wasm-device-plugin"] {
        assert_eq!(invalid_requests(&plane, account), Vec::<String>::new());
        assert_eq!(requests_rbac_denies(&plane, account), Vec::<String>::new());
    }
}

const LABEL: &str = "wasm-device-plugin.io/config";

/// A config directory with named sets: the default set serves
/// `cluster.example.com/a` on hot0, set `other` serves `cluster.example.com/b` on hot1.
fn config_sets_node(name: &str, report_state: bool) -> Node {
    let node = Node::new(name);
    node.add_device_node("/dev/hot0");
    node.add_device_node("/dev/hot1");
    node.write_config(
        "host.toml",
        &format!(
            "version = 1\npoll-interval-ms = 100\nreload-debounce-ms = 20\n[config-sets]\nnode-label = \"{LABEL}\"\nreport-state = {report_state}\n"
        ),
    );
    node.write_config(
        "a.toml",
        "version = 1\nresource = \"cluster.example.com/a\"\n[[nodes]]\npath = \"/dev/hot0\"\n",
    );
    node.write_config(
        "sets/other/b.toml",
        "version = 1\nresource = \"cluster.example.com/b\"\n[[nodes]]\npath = \"/dev/hot1\"\n",
    );
    node
}

async fn label_node(admin: &Client, node: &str, value: Option<&str>) {
    let nodes: Api<NodeObject> = Api::all(admin.clone());
    nodes
        .patch(
            node,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {LABEL: value}}})),
        )
        .await
        .unwrap();
}

fn node_label(node: &NodeObject, key: &str) -> Option<String> {
    node.metadata.labels.as_ref()?.get(key).cloned()
}

/// Waits for the `count`th "configuration set switched" line naming `to`.
async fn switched(host: &HostProcess, to: &str, count: usize) {
    let needle = format!("to={to} ");
    let started = Instant::now();
    loop {
        let log = host.log();
        let seen = log
            .lines()
            .filter(|line| line.contains("configuration set switched") && line.contains(&needle))
            .count();
        if seen >= count {
            return;
        }
        assert!(
            started.elapsed() < LONG,
            "no switch #{count} to {to}:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The node label is followed through the real server's watch: a label
/// change switches the set; across an API server restart, and across a
/// restart after which the host's last resource version was compacted
/// away (410 Gone), the next label change is followed too.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn configuration_sets_follow_the_node_label_through_server_restarts() {
    let mut plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-config-sets.pypi-1.37.yaml").await;
    let node = config_sets_node("node-sets", false);
    create_node(&plane.admin, "node-sets", json!({})).await;
    let kubeconfig = host_kubeconfig(&plane, "wasm-device-plugin", "node-sets").await;
    let host = node.spawn_host(&kubeconfig, &[]);
    host.wait_for_log("configuration set", LONG).await;

    label_node(&plane.admin, "node-sets", Some("other")).await;
    switched(&host, "other", 1).await;

    plane.restart_apiserver().await;
    label_node(&plane.admin, "node-sets", None).await;
    switched(&host, "default", 1).await;

    // The server goes away; meanwhile etcd moves on and compacts every
    // revision the host has seen: its watch resumes with 410 Gone and
    // must list again.
    plane.stop_apiserver();
    plane.etcd_compact_all();
    plane.start_apiserver().await;
    label_node(&plane.admin, "node-sets", Some("other")).await;
    switched(&host, "other", 2).await;

    assert_eq!(
        requests_rbac_denies(&plane, "wasm-device-plugin"),
        Vec::<String>::new()
    );
    // The outages are the host's WARN and INFO, never its ERROR (kube's
    // client logs its own connection errors at ERROR meanwhile).
    let log = host.log();
    let errors = log
        .lines()
        .filter(|line| line.contains(" ERROR ") && !line.contains(" kube_client"));
    assert_eq!(errors.count(), 0, "{log}");
}

/// `report-state`: without `patch` on nodes (the overlay as shipped) the
/// switch still happens and the refused write is a WARN, as documented;
/// with the grant the configuration-sets page shows, the state label is
/// written.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn the_state_label_is_written_with_patch_and_only_warned_about_without() {
    let plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-config-sets.pypi-1.37.yaml").await;
    let node = config_sets_node("node-state", true);
    create_node(&plane.admin, "node-state", json!({})).await;
    let kubeconfig = host_kubeconfig(&plane, "wasm-device-plugin", "node-state").await;
    let host = node.spawn_host(&kubeconfig, &[]);

    label_node(&plane.admin, "node-state", Some("other")).await;
    switched(&host, "other", 1).await;
    host.wait_for_log(
        "cannot write the configuration set's state into the node's label",
        LONG,
    )
    .await;
    assert_eq!(
        requests_rbac_denies(&plane, "wasm-device-plugin"),
        ["patch nodes (namespace \"\")"]
    );

    // The grant of docs/operator/configuration-sets.md ("only with
    // report-state = true").
    let grant = node.tmp.path().join("patch-nodes.yaml");
    std::fs::write(
        &grant,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: wasm-device-plugin-config-sets-state\nrules:\n- apiGroups: [\"\"]\n  resources: [\"nodes\"]\n  verbs: [\"patch\"]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: wasm-device-plugin-config-sets-state\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: wasm-device-plugin-config-sets-state\nsubjects:\n- kind: ServiceAccount\n  name: wasm-device-plugin\n  namespace: wasm-device-plugin\n",
    )
    .unwrap();
    plane.kubectl(&["apply", "-f", grant.to_str().unwrap()]);
    label_node(&plane.admin, "node-state", None).await;
    switched(&host, "default", 1).await;
    let nodes: Api<NodeObject> = Api::all(plane.admin.clone());
    let started = Instant::now();
    loop {
        let object = nodes.get("node-state").await.unwrap();
        if node_label(&object, &format!("{LABEL}.state")).as_deref() == Some("success") {
            break;
        }
        assert!(started.elapsed() < LONG, "no state label:\n{}", host.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
