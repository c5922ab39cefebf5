//! A resource moved between the device-plugin API and DRA by a live
//! reload, against the simulated kubelet (device manager and PodResources)
//! and the fake API server: what the kubelet, the scheduler and running
//! containers notice, both ways, and what a restart in between keeps.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::common::WAIT;
use crate::common::dra_world::*;
use wdp_fake_apiserver::ExtendedResourceRequest;
use wdp_kubelet_api::dra::v1 as dra;
use wdp_kubelet_api::v1beta1;
use wdp_kubelet_sim::{PodResourcesFault, PodResourcesServer, SimKubelet};

const RESOURCE: &str = "example.com/gpu";
const FILE: &str = "gpu.toml";

fn device_plugin_config() -> String {
    format!(
        "version = 1\nresource = \"{RESOURCE}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
    )
}

fn dra_config() -> String {
    format!(
        "version = 1\nresource = \"{RESOURCE}\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
    )
}

/// The DRA device names the driver's slices publish now.
fn published(w: &DraWorld) -> BTreeSet<String> {
    w.api
        .slices_of(NODE, DRIVER)
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect()
}

/// Waits until the slices publish exactly `count` devices, none of `held`.
async fn wait_published_without(w: &DraWorld, count: usize, held: &[String]) {
    let held: Vec<String> = held.iter().map(|id| name_of(id)).collect();
    w.api
        .wait_for_slices(
            |slices| {
                let names: Vec<&String> = slices
                    .iter()
                    .filter(|s| s.spec.driver == DRIVER)
                    .flat_map(|s| s.spec.devices.iter().flatten().map(|d| &d.name))
                    .collect();
                names.len() == count && !names.iter().any(|n| held.contains(n))
            },
            WAIT,
        )
        .await
        .unwrap_or_else(|e| panic!("{e:?}: published {:?}", published(w)));
}

/// A device-plugin world: the fixture's 8 GPUs served through the
/// device-plugin API, the simulated kubelet serving PodResources.
async fn device_plugin_world() -> (DraWorld, SimKubelet, PodResourcesServer) {
    let w = DraWorld::new("").await;
    w.world.write_config(FILE, &device_plugin_config());
    let kubelet = SimKubelet::start(w.world.plugins()).await.unwrap();
    let pod_resources = kubelet
        .serve_pod_resources(w.options().pod_resources_socket)
        .unwrap();
    (w, kubelet, pod_resources)
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
        .unwrap_or_else(|e| panic!("{e}: {:?}", kubelet.plugin(RESOURCE)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_moves_to_dra_and_back_with_its_containers_running() {
    let (w, kubelet, _pod_resources) = device_plugin_world().await;
    let host = w.start().await;
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, 8).await;
    let first = kubelet.admit(RESOURCE, 1).await.unwrap();
    let second = kubelet.admit(RESOURCE, 1).await.unwrap();
    let held = [first.devices[0].clone(), second.devices[0].clone()];

    // To DRA.
    w.world.write_config(FILE, &dra_config());
    let summary = host.reload().await.unwrap();
    assert_eq!(summary.switched, [RESOURCE]);
    // The device plugin offers nothing and stays registered: allocatable
    // 0, a new pod is refused by the kubelet, running containers start
    // again.
    healthy(&kubelet, 0).await;
    let state = kubelet.state();
    assert_eq!(state.allocatable(RESOURCE), Some(0));
    assert_eq!(state.capacity(RESOURCE), Some(8));
    assert!(kubelet.admit(RESOURCE, 1).await.is_err());
    assert_eq!(
        kubelet.restart_container(&first.pod).await.unwrap(),
        first.devices
    );
    // DRA publishes the six devices no container holds.
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    wait_published_without(&w, 6, &held).await;
    // The scheduler's claim for a pod asking `example.com/gpu: 6` gets
    // them; one claim naming a held device is refused at prepare.
    let request = ExtendedResourceRequest {
        namespace: "default".to_owned(),
        pod: "dra-pod".to_owned(),
        pod_uid: "dra-pod-uid".to_owned(),
        resource: RESOURCE.to_owned(),
        count: 6,
        device_class: "gpu.example.com".to_owned(),
        driver: DRIVER.to_owned(),
        node: NODE.to_owned(),
    };
    let scheduled = w.api.allocate_extended_resource(&request).unwrap();
    let mut client = dra_client(&endpoint).await;
    let answer = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&scheduled)],
        })
        .await
        .unwrap()
        .into_inner();
    let prepared = &answer.claims[&scheduled.metadata.uid.clone().unwrap()];
    assert_eq!(prepared.error, "");
    assert_eq!(prepared.devices.len(), 6);
    let thief = w
        .api
        .put_claim(claim("thief", DRIVER, &[&name_of(&held[0])]));
    let refused = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&thief)],
        })
        .await
        .unwrap()
        .into_inner();
    let error = &refused.claims[&thief.metadata.uid.clone().unwrap()].error;
    assert!(
        error.contains("withheld") && error.contains("device-plugin API"),
        "{error}"
    );

    // A container goes: its device is published within about a second
    // of the kubelet no longer listing it.
    let ended = Instant::now();
    assert!(kubelet.end_pod(&first.pod));
    wait_published_without(&w, 7, &held[1..]).await;
    println!(
        "released device published {:?} after its pod ended",
        ended.elapsed()
    );
    // The last one goes: the device-plugin server stops, the record goes.
    assert!(kubelet.end_pod(&second.pod));
    wait_published_without(&w, 8, &[]).await;
    kubelet
        .wait_for("the device plugin to stop", WAIT, |s| {
            s.plugins.get(RESOURCE).is_some_and(|p| !p.streaming)
        })
        .await
        .unwrap();
    // The kubelet keeps the stopped endpoint for its grace, then counts
    // the resource at 0 (the key stays).
    kubelet.set_endpoint_grace(std::time::Duration::ZERO);
    assert_eq!(kubelet.state().capacity(RESOURCE), Some(0));
    tokio::time::timeout(WAIT, host.handovers_ended())
        .await
        .expect("the handover to DRA ends once no container holds a device");
    assert!(host.handovers().await.is_empty());
    assert!(
        !w.world
            .tmp
            .path()
            .join("state/api-switch/example.com_gpu.json")
            .exists()
    );

    // Back to the device plugin while the claim holds six devices: only
    // the two free ones are offered until it is unprepared.
    w.world.write_config(FILE, &device_plugin_config());
    let summary = host.reload().await.unwrap();
    assert_eq!(summary.switched, [RESOURCE]);
    kubelet.wait_registered(RESOURCE, 2, WAIT).await.unwrap();
    healthy(&kubelet, 2).await;
    assert!(published(&w).is_empty(), "the slices are withdrawn");
    let admitted = kubelet.admit(RESOURCE, 2).await.unwrap();
    let claimed: BTreeSet<String> = prepared
        .devices
        .iter()
        .map(|d| wdp_k8s_naming::device_id(&d.device_name).unwrap())
        .collect();
    assert!(
        admitted.devices.iter().all(|d| !claimed.contains(d)),
        "{admitted:?} vs {claimed:?}"
    );
    client
        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
            claims: vec![claim_ref(&scheduled)],
        })
        .await
        .unwrap();
    healthy(&kubelet, 8).await;
    // The handover ends once every device is offered again.
    tokio::time::timeout(WAIT, host.handovers_ended())
        .await
        .expect("the handover to the device plugin ends once every claim is unprepared");
    assert!(host.handovers().await.is_empty());
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state()
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_pod_resources_keep_every_device_withheld_until_read() {
    let (w, kubelet, pod_resources) = device_plugin_world().await;
    let host = w.start().await;
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, 8).await;
    let holder = kubelet.admit(RESOURCE, 1).await.unwrap();
    let held = holder.devices[0].clone();

    // Missing socket: nothing published.
    pod_resources.stop();
    w.world.write_config(FILE, &dra_config());
    host.reload().await.unwrap();
    wait_for_socket(&w.registration_socket()).await;
    w.register().await;
    tokio::time::timeout(WAIT, async {
        while !host.ready().await {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "never ready: {:?}",
            futures::executor::block_on(host.not_ready())
        )
    });
    assert!(published(&w).is_empty(), "{:?}", published(&w));

    // Garbage, then refusals: still nothing.
    let pod_resources = kubelet
        .serve_pod_resources(w.options().pod_resources_socket)
        .unwrap();
    for fault in [PodResourcesFault::Garbage, PodResourcesFault::Refuse] {
        pod_resources.set_fault(fault);
        let calls = pod_resources.calls();
        tokio::time::timeout(WAIT, async {
            while pod_resources.calls() < calls + 1 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap();
        assert!(published(&w).is_empty(), "{fault:?}: {:?}", published(&w));
    }
    // Read at last: everything but the held device.
    pod_resources.set_fault(PodResourcesFault::None);
    wait_published_without(&w, 7, std::slice::from_ref(&held)).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_switch_resumes_the_handover() {
    let (w, mut kubelet, _pod_resources) = device_plugin_world().await;
    let host = w.start().await;
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, 8).await;
    let holder = kubelet.admit(RESOURCE, 1).await.unwrap();
    w.world.write_config(FILE, &dra_config());
    host.reload().await.unwrap();
    wait_for_socket(&w.registration_socket()).await;
    w.register().await;
    wait_published_without(&w, 7, &holder.devices).await;

    // The kubelet restarts (its checkpoint keeps the pod): the retiring
    // server registers again, still offering nothing.
    kubelet.restart_with_checkpoint().await.unwrap();
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, 0).await;
    assert!(kubelet.restart_container(&holder.pod).await.is_ok());

    // The host restarts: it resumes from its record, the held device
    // stays out of the slices and the device plugin stays registered.
    host.shutdown().await;
    drop(host);
    let host = w.start().await;
    kubelet.wait_registered(RESOURCE, 2, WAIT).await.unwrap();
    healthy(&kubelet, 0).await;
    wait_for_socket(&w.registration_socket()).await;
    w.register().await;
    wait_published_without(&w, 7, &holder.devices).await;
    assert_eq!(host.handovers().await, [(RESOURCE.to_owned(), true)]);
    assert!(kubelet.end_pod(&holder.pod));
    wait_published_without(&w, 8, &[]).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switch_back_before_the_handover_finished_gives_nothing_twice() {
    let (w, kubelet, _pod_resources) = device_plugin_world().await;
    let host = w.start().await;
    kubelet.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    healthy(&kubelet, 8).await;
    let holder = kubelet.admit(RESOURCE, 1).await.unwrap();

    // To DRA; a claim takes one of the free devices.
    w.world.write_config(FILE, &dra_config());
    host.reload().await.unwrap();
    wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    wait_published_without(&w, 7, &holder.devices).await;
    let claimed = w.api.put_claim(claim("early", DRIVER, &[&name_of(GPU_B)]));
    let mut client = dra_client(&endpoint).await;
    let answer = client
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(&claimed)],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        answer.claims[&claimed.metadata.uid.clone().unwrap()].error,
        ""
    );

    // Back before the holder ended: the device plugin offers everything
    // but the claimed device (the holder's device is the kubelet's own
    // business: it is allocated there, and offered).
    w.world.write_config(FILE, &device_plugin_config());
    host.reload().await.unwrap();
    healthy(&kubelet, 7).await;
    let record = kubelet.plugin(RESOURCE).unwrap();
    let unhealthy: Vec<&str> = record
        .devices
        .iter()
        .filter(|d| d.health != v1beta1::HEALTHY)
        .map(|d| d.id.as_str())
        .collect();
    assert_eq!(unhealthy, [GPU_B]);
    let admitted = kubelet.admit(RESOURCE, 6).await.unwrap();
    assert!(
        !admitted
            .devices
            .iter()
            .any(|d| d == GPU_B || holder.devices.contains(d))
    );
    assert_eq!(
        kubelet.restart_container(&holder.pod).await.unwrap(),
        holder.devices
    );
    client
        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
            claims: vec![claim_ref(&claimed)],
        })
        .await
        .unwrap();
    healthy(&kubelet, 8).await;
    host.shutdown().await;
}
