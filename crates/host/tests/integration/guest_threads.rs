//! Where a guest call runs, as the kubelet notices it: a guest that can
//! only compute runs on the calling worker (handing the worker's other
//! tasks to another thread), so a spinning one holds up no other RPC and
//! still fails at its deadline.
//!
//! (A guest that imports `hardware` keeps the blocking pool and its
//! backstop; a fixture cannot make an attribute read block, since the
//! hardware layer opens attributes non-blocking and refuses anything but
//! regular files.)

use std::time::{Duration, Instant};

use crate::common::{WAIT, World};
use wdp_kubelet_api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    PreferredAllocationRequest,
};

const GPU: &str = "example.com/gpu";
const PLAIN: &str = "example.com/plain";

fn resource(name: &str, hooks: &str) -> String {
    format!(
        "version = 1\nresource = \"{name}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n{hooks}"
    )
}

/// A world over the 8-GPU fixture with `hooks` bound on `example.com/gpu`
/// and a built-in resource `example.com/plain` over the same GPUs.
fn world(guest: &str, hooks: &str) -> World {
    let world = World::new(Some("gpu-server"));
    world.install_guest(guest, "guest.wasm");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config("gpu.toml", &resource(GPU, hooks));
    world.write_config("plain.toml", &resource(PLAIN, ""));
    world
}

// One worker thread: were the spinning call to hold that worker, nothing
// else could be answered until its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_spinning_preferred_allocation_holds_up_no_other_rpc() {
    let world = world(
        wdp_guest_artifacts::HOSTILE_INFINITE_LOOP,
        "[hooks.preferred-allocation]\nguest = \"guests/guest.wasm\"\ntimeout-ms = 3000\n",
    );
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let gpus = kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    kubelet.wait_registered(PLAIN, 1, WAIT).await.unwrap();
    let ids: Vec<String> = gpus.devices.iter().map(|d| d.id.clone()).collect();

    let mut spinning_client = kubelet.client(GPU).await.unwrap();
    let started = Instant::now();
    let spinning = tokio::spawn(async move {
        spinning_client
            .get_preferred_allocation(PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: ids,
                    must_include_device_i_ds: Vec::new(),
                    allocation_size: 2,
                }],
            })
            .await
    });
    // Wait until the guest call is running.
    crate::common::wait_metrics(&host, "the preferred-allocation call to spin", |m| {
        crate::common::sample(
            m,
            "wasm_device_plugin_guest_calls_in_flight",
            &[("hook", "preferred-allocation")],
        ) >= 1.0
    })
    .await;
    let mut plain = kubelet.client(PLAIN).await.unwrap();
    for _ in 0..10 {
        tokio::time::timeout(
            WAIT,
            plain.allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: vec![gpus.devices[0].id.clone()],
                }],
            }),
        )
        .await
        .expect("Allocate waited for the spinning guest")
        .expect("Allocate failed");
    }
    assert!(
        started.elapsed() < Duration::from_millis(3000),
        "the other RPCs were answered only after the spinning call's deadline"
    );
    let status = spinning
        .await
        .unwrap()
        .expect_err("a spinning guest answered");
    assert_eq!(status.code(), tonic::Code::DeadlineExceeded, "{status}");
    assert!(started.elapsed() >= Duration::from_millis(3000));
    host.shutdown().await;
}
