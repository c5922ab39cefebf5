//! How a shutdown leaves the kubelet: a shutdown ends the kubelet's
//! connections gracefully; a shutdown before the process exits removes the
//! sockets and leaves those connections for the exit to close.

use wdp_host::Host;

use crate::common::{WAIT, World, allocate_one};

const ACC: &str = "example.com/acc";

/// Two plain device nodes under `/dev`, one resource of them.
fn acc_world() -> World {
    let world = World::new(None);
    for i in 0..2 {
        world.write_host(&format!("/dev/acc{i}"), "");
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "acc.toml",
        &format!("version = 1\nresource = \"{ACC}\"\n[[nodes]]\npath = \"/dev/acc*\"\n"),
    );
    world
}

/// Shuts `host` down with `shutdown` while the kubelet holds a connection
/// to the resource's socket; whether an Allocate on that connection is
/// answered afterwards (the socket is gone either way).
async fn allocate_after(shutdown: impl AsyncFnOnce(&Host)) -> Result<(), tonic::Status> {
    let world = acc_world();
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
