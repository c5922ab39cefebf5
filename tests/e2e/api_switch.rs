//! A resource moved from the device-plugin API to DRA by editing its file,
//! with the real binary: the claim the scheduler writes for a pod that
//! still asks for the extended resource (KEP-5004) gives its container
//! what the device plugin's `Allocate` gave for the same device: the
//! same device and companion nodes, and the same environment from the
//! same allocate guest.

use std::collections::BTreeSet;
use std::sync::Arc;

use wdp_fake_apiserver::{ExtendedResourceRequest, FakeApiServer};
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet};

use crate::support::{World, read_cdi_spec};

const RESOURCE: &str = "e2e.example.com/hot";
const DRIVER: &str = "hot.e2e.example.com";
const NODE: &str = "node-e2e";
const DEVICE: &str = "/dev/hot0";
const COMPANION: &str = "/dev/ctl0";
const LONG: std::time::Duration = std::time::Duration::from_secs(30);

fn config(api: &str) -> String {
    format!(
        "version = 1\nresource = \"{RESOURCE}\"\n{api}[[nodes]]\npath = \"/dev/hot*\"\n[[companion-nodes]]\npath = \"{COMPANION}\"\n[hooks.allocate]\nguest = \"guests/allocate-shaper.wasm\"\n"
    )
}

/// Host paths and environment a container gets, as sets.
#[derive(Debug, PartialEq)]
struct ContainerEdits {
    nodes: BTreeSet<String>,
    env: BTreeSet<String>,
}

#[tokio::test]
async fn an_extended_resource_claim_gets_what_allocate_gave() {
    let world = World::new();
    for node in [DEVICE, "/dev/hot1", COMPANION] {
        world.add_node(node);
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm");
    world.write_config("hot.toml", &config(""));
    let api = Arc::new(FakeApiServer::start().await.unwrap());
    api.put_node(serde_json::from_value(serde_json::json!({"metadata": {"name": NODE}})).unwrap());
    let tmp = world.tmp.path();
    api.write_kubeconfig(&tmp.join("kubeconfig")).unwrap();
    let kubelet = world.kubelet().await;
    let pod_resources = kubelet
        .serve_pod_resources(tmp.join("pod-resources/kubelet.sock"))
        .unwrap();
    let dra = SimDraKubelet::start(world.registry(), DraSimOptions::default())
        .await
        .unwrap();
    let path = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    let extra = [
        "--registration".to_owned(),
        "kubelet".to_owned(),
        "--cdi-dir".to_owned(),
        path(tmp.join("cdi")),
        "--plugins-dir".to_owned(),
        path(tmp.join("kubelet-plugins")),
        "--state-dir".to_owned(),
        path(tmp.join("state")),
        "--kubeconfig".to_owned(),
        path(tmp.join("kubeconfig")),
        "--node-name".to_owned(),
        NODE.to_owned(),
        "--pod-resources-socket".to_owned(),
        path(pod_resources.socket().to_owned()),
    ];
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let plugin = world.spawn_with(&extra);
    kubelet
        .wait_registered(RESOURCE, 1, LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    // Through the device plugin: the first device, then the pod ends.
    let admission = kubelet.admit(RESOURCE, 1).await.unwrap();
    assert_eq!(admission.devices, ["hot0"]);
    let allocated = ContainerEdits {
        nodes: admission
            .response
            .devices
            .iter()
            .map(|d| d.host_path.clone())
            .collect(),
        env: admission
            .response
            .envs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect(),
    };
    assert!(kubelet.end_pod(&admission.pod));

    // The file moves the resource to DRA; the scheduler's claim for a pod
    // asking for one `e2e.example.com/hot` gets the same device.
    world.write_config(
        "hot.toml",
        &config(&format!("api = \"dra\"\ndriver = \"{DRIVER}\"\n")),
    );
    dra.wait_for("driver registration", LONG, |s| {
        s.drivers.contains_key(DRIVER)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    api.wait_for_slices(
        |slices| {
            slices
                .iter()
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
                == 2
        },
        LONG,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let claim = api
        .allocate_extended_resource(&ExtendedResourceRequest {
            namespace: "default".to_owned(),
            pod: "unchanged-spec".to_owned(),
            pod_uid: "unchanged-spec-uid".to_owned(),
            resource: RESOURCE.to_owned(),
            count: 1,
            device_class: "hot.e2e.example.com".to_owned(),
            driver: DRIVER.to_owned(),
            node: NODE.to_owned(),
        })
        .unwrap();
    let reference = ClaimRef::new(
        "default",
        claim.metadata.name.as_deref().unwrap(),
        claim.metadata.uid.as_deref().unwrap(),
    );
    let outcome = dra
        .prepare(DRIVER, std::slice::from_ref(&reference))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let devices = outcome.claims[&reference.uid]
        .clone()
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert_eq!(devices.len(), 1);
    assert_eq!(
        devices[0].device_name,
        wdp_k8s_naming::device_name("hot0").unwrap()
    );
    let spec_path = tmp
        .join("cdi")
        .join(format!("wdp-e2e.example.com-hot_{}.json", reference.uid));
    let spec = read_cdi_spec(&spec_path);
    let mut claimed = ContainerEdits {
        nodes: BTreeSet::new(),
        env: BTreeSet::new(),
    };
    let edits = std::iter::once(&spec["containerEdits"]).chain(
        spec["devices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["containerEdits"]),
    );
    for edit in edits {
        for node in edit["deviceNodes"].as_array().into_iter().flatten() {
            let host = node["hostPath"].as_str().or(node["path"].as_str()).unwrap();
            claimed.nodes.insert(host.to_owned());
        }
        for env in edit["env"].as_array().into_iter().flatten() {
            claimed.env.insert(env.as_str().unwrap().to_owned());
        }
    }
    assert_eq!(claimed, allocated, "{spec:#}");
    assert!(
        allocated.nodes.iter().any(|n| n.ends_with(DEVICE)),
        "{allocated:?}"
    );
    assert!(
        allocated.nodes.iter().any(|n| n.ends_with(COMPANION)),
        "{allocated:?}"
    );
    assert!(
        allocated.env.contains("WDP_VISIBLE_DEVICES=hot0"),
        "{allocated:?}"
    );
}
