//! How a shutdown leaves the kubelet: a shutdown ends the kubelet's
//! connections gracefully; a shutdown before the process exits removes the
//! sockets, answers the calls in progress and leaves the connections for
//! the exit to close.

use wdp_host::Host;
use wdp_kubelet_api::v1beta1::{ContainerPreferredAllocationRequest, PreferredAllocationRequest};

use crate::common::{WAIT, World, allocate_one, nodes_world, sample, wait_metrics};

const ACC: &str = "example.com/acc";

/// Two plain device nodes and one resource of them with `hooks`.
fn acc_world(hooks: &str) -> World {
    nodes_world(ACC, 2, hooks)
}

/// Shuts `host` down with `shutdown` while the kubelet holds a connection
/// to the resource's socket; whether an Allocate on that connection is
/// answered afterwards (the socket is gone either way).
async fn allocate_after(shutdown: impl AsyncFnOnce(&Host)) -> Result<(), tonic::Status> {
    let world = acc_world("");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(ACC, 1, WAIT).await.unwrap();
    let socket = world.plugins().join(&record.registration.endpoint);
    let mut client = kubelet.client(ACC).await.unwrap();
    client.allocate(allocate_one("acc0")).await.unwrap();

    shutdown(&host).await;
    assert!(!socket.exists(), "{} is removed", socket.display());
    let answer = tokio::time::timeout(WAIT, client.allocate(allocate_one("acc1")))
        .await
        .expect("an Allocate after the shutdown is answered or refused at once");
    answer.map(drop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_closes_the_kubelets_connections() {
    let answer = allocate_after(async |host| host.shutdown().await).await;
    answer.expect_err("the connection is closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_before_exit_leaves_the_kubelets_connections_to_the_exit() {
    let answer = allocate_after(async |host| host.shutdown_before_exit().await).await;
    answer.expect("the connection made before is still answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_before_exit_answers_the_calls_in_progress_first() {
    // A preferred-allocation guest that spins until its 1 s deadline; the
    // built-in policy answers then.
    let world = acc_world(
        "[hooks.preferred-allocation]\nguest = \"guests/loop.wasm\"\ntimeout-ms = 1000\non-error = \"builtin\"\n",
    );
    world.install_guest(wdp_guest_artifacts::HOSTILE_INFINITE_LOOP, "loop.wasm");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(ACC, 1, WAIT).await.unwrap();
    let mut client = kubelet.client(ACC).await.unwrap();
    let call = tokio::spawn(async move {
        client
            .get_preferred_allocation(PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: vec!["acc0".into(), "acc1".into()],
                    must_include_device_i_ds: Vec::new(),
                    allocation_size: 1,
                }],
            })
            .await
    });
    let in_flight = |m: &str| {
        sample(
            m,
            "wasm_device_plugin_guest_calls_in_flight",
            &[("hook", "preferred-allocation")],
        )
    };
    wait_metrics(&host, "the preferred-allocation call to spin", |m| {
        in_flight(m) >= 1.0
    })
    .await;

    host.shutdown_before_exit().await;
    assert_eq!(
        in_flight(&host.metrics().encode()),
        0.0,
        "the shutdown returned while the call was still being answered"
    );
    let answer = tokio::time::timeout(WAIT, call)
        .await
        .expect("the call is answered")
        .unwrap()
        .expect("the built-in policy answers after the guest's deadline");
    assert_eq!(
        answer.into_inner().container_responses[0].device_i_ds.len(),
        1
    );
}
