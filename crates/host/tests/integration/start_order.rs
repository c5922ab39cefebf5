//! A start registers its device-plugin resources while their first scan
//! runs, as the peer plugins do, and still refuses a scan that fails: the
//! registration is withdrawn with the start. The kubelet never sees a
//! list before the scan's, so the first one it gets is whole.

use wdp_host::{Host, Metrics};

use crate::common::{WAIT, World, nodes_world};

const ACC: &str = "example.com/acc";

/// Eight plain device nodes and one resource of them with `hooks`.
fn acc_world(hooks: &str) -> World {
    nodes_world(ACC, 8, hooks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_registers_during_its_first_scan_and_a_failing_scan_withdraws_the_socket() {
    // A health guest that spins until its deadline: the first scan fails
    // after it, well after the registration.
    let world = acc_world("[hooks.health]\nguest = \"guests/loop.wasm\"\ntimeout-ms = 1500\n");
    world.install_guest(wdp_guest_artifacts::HOSTILE_INFINITE_LOOP, "loop.wasm");
    let kubelet = world.kubelet().await;
    let start = tokio::spawn(Host::start(world.options(), Metrics::new()));

    let state = kubelet
        .wait_for("the first registration", WAIT, |s| {
            s.plugins.get(ACC).is_some_and(|p| p.registrations >= 1)
        })
        .await
        .unwrap();
    assert!(
        !start.is_finished(),
        "registered only once the start had ended"
    );
    let socket = world
        .plugins()
        .join(&state.plugins[ACC].registration.endpoint);
    assert!(socket.exists(), "{} is served", socket.display());

    let error = match start.await.unwrap() {
        Ok(_) => panic!("a start whose first scan fails must fail"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("acc.toml"), "{error}");
    assert!(error.contains("health"), "{error}");
    assert!(!socket.exists(), "{} is removed", socket.display());
    let plugin = &kubelet.state().plugins[ACC];
    assert_eq!(
        plugin.lists_received, 0,
        "nothing was listed before the scan"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_list_after_a_start_holds_every_device() {
    let world = acc_world("");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(ACC, 1, WAIT).await.unwrap();
    assert_eq!(record.lists_received, 1);
    assert_eq!(
        record
            .devices
            .iter()
            .filter(|d| d.health == "Healthy")
            .count(),
        8,
        "{:?}",
        record.devices
    );
    host.shutdown().await;
}
