//! The kubelet contract with built-in policy: registration, options,
//! ListAndWatch, admission, kubelet restarts, shutdown, bad input.

use std::time::Duration;

use wdp_kubelet_api::v1beta1::{AllocateRequest, ContainerAllocateRequest, Empty};

use crate::support::{WAIT, World, run_to_end};

const FUSE: &str = "e2e.example.com/fuse";
const TUN: &str = "e2e.example.com/tun";

fn two_resources(world: &World) {
    world.add_node("/dev/fuse");
    world.add_node("/dev/net/tun");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "fuse.toml",
        &format!(
            "version = 1\nresource = \"{FUSE}\"\nget-preferred-allocation = true\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 4\n"
        ),
    );
    world.write_config(
        "tun.toml",
        &format!(
            "version = 1\nresource = \"{TUN}\"\npre-start-required = true\npermissions = \"rwm\"\n[[nodes]]\npath = \"/dev/net/tun\"\n[[nodes]]\npath = \"/dev/vhost-*\"\n"
        ),
    );
}

#[tokio::test]
async fn every_resource_registers_with_options_that_agree() {
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();

    let fuse = kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    let tun = kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();
    assert_eq!(fuse.registration.version, "v1beta1");
    assert!(!fuse.registration.endpoint.contains('/'));
    assert_ne!(fuse.registration.endpoint, tun.registration.endpoint);
    let tun_options = tun.registration.options.unwrap();
    assert!(tun_options.pre_start_required);
    // No guest chooses for tun and its node has no NUMA node: nothing
    // for GetPreferredAllocation to add, so it is not offered (one round
    // trip less per container). fuse's file asks for it.
    assert!(!tun_options.get_preferred_allocation_available);
    assert!(
        fuse.registration
            .options
            .as_ref()
            .unwrap()
            .get_preferred_allocation_available
    );

    // Options asked directly agree with the registration too.
    let mut client = kubelet.client(TUN).await.unwrap();
    let asked = client
        .get_device_plugin_options(Empty {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(asked, tun_options);

    let ids: Vec<String> = fuse.devices.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids, ["fuse::0", "fuse::1", "fuse::2", "fuse::3"]);
    assert!(fuse.devices.iter().all(|d| d.health == "Healthy"));
    assert_eq!(tun.healthy_ids(), ["net-tun"]);
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn list_and_watch_follows_hardware_for_every_watcher() {
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();

    // Two more watchers beside the kubelet's own stream.
    let mut streams = Vec::new();
    for _ in 0..2 {
        let mut client = kubelet.client(TUN).await.unwrap();
        let mut stream = client.list_and_watch(Empty {}).await.unwrap().into_inner();
        let first = stream.message().await.unwrap().unwrap();
        assert_eq!(first.devices.len(), 1);
        streams.push(stream);
    }

    // A node matching the glob appears: a new device.
    world.add_node("/dev/vhost-net");
    kubelet
        .wait_devices(TUN, WAIT, |d| d.len() == 2)
        .await
        .unwrap();
    // The node goes away: the device stays, Unhealthy.
    world.remove_node("/dev/net/tun");
    let devices = kubelet
        .wait_devices(TUN, WAIT, |d| {
            d.iter()
                .any(|d| d.id == "net-tun" && d.health == "Unhealthy")
        })
        .await
        .unwrap();
    assert_eq!(devices.len(), 2);
    // The log names the device and why, at the default level.
    let log = plugin.wait_for_log("device net-tun is unhealthy: ").await;
    let line = log
        .lines()
        .find(|l| l.contains("device net-tun is unhealthy"))
        .unwrap();
    assert!(
        line.contains("WARN") && line.contains("hardware gone"),
        "{line}"
    );
    // It comes back: Healthy again.
    world.add_node("/dev/net/tun");
    kubelet
        .wait_devices(TUN, WAIT, |d| {
            d.len() == 2 && d.iter().all(|d| d.health == "Healthy")
        })
        .await
        .unwrap();
    plugin.wait_for_log("device net-tun is healthy again").await;

    // The extra watchers saw the same final state.
    for stream in &mut streams {
        loop {
            let list = tokio::time::timeout(WAIT, stream.message())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if list.devices.len() == 2 && list.devices.iter().all(|d| d.health == "Healthy") {
                break;
            }
        }
    }
}

#[tokio::test]
async fn admission_goes_through_all_three_rpcs_with_host_paths() {
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();

    let fuse = kubelet.admit(FUSE, 3).await.unwrap();
    assert_eq!(fuse.preferred.as_ref().unwrap().len(), 3);
    assert_eq!(fuse.response.devices.len(), 1, "replicas share one node");
    let spec = &fuse.response.devices[0];
    assert_eq!(
        spec.host_path, "/dev/fuse",
        "host path, not under the host root"
    );
    assert_eq!(spec.container_path, "/dev/fuse");
    assert_eq!(spec.permissions, "rw");
    assert!(!fuse.pre_started);

    let tun = kubelet.admit(TUN, 1).await.unwrap();
    assert!(tun.pre_started);
    assert_eq!(tun.response.devices[0].permissions, "rwm");
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn unknown_and_unhealthy_ids_are_refused_by_name() {
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();
    let mut client = kubelet.client(TUN).await.unwrap();

    let request = |ids: &[&str]| AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: ids.iter().map(|s| s.to_string()).collect(),
        }],
    };
    let err = client
        .allocate(request(&["no-such-device"]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("no-such-device"),
        "{}",
        err.message()
    );

    world.remove_node("/dev/net/tun");
    kubelet
        .wait_devices(TUN, WAIT, |d| d.iter().all(|d| d.health == "Unhealthy"))
        .await
        .unwrap();
    let err = client.allocate(request(&["net-tun"])).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("net-tun") && err.message().contains("unhealthy"),
        "{}",
        err.message()
    );
}

#[tokio::test]
async fn kubelet_restarts_are_followed_by_registration() {
    let world = World::new();
    two_resources(&world);
    let mut kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();

    for round in 0..5 {
        kubelet.restart().await.unwrap();
        for resource in [FUSE, TUN] {
            let record = kubelet
                .wait_registered(resource, 1, WAIT)
                .await
                .unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert!(!record.devices.is_empty());
        }
        // Admission works against the new kubelet.
        if let Err(e) = kubelet.admit(FUSE, 1).await {
            panic!(
                "round {round}: {e}\n{:#?}\n{}",
                kubelet.state(),
                _plugin.log()
            );
        }
    }
}

#[tokio::test]
async fn waits_for_a_kubelet_that_starts_later() {
    let world = World::new();
    two_resources(&world);
    let mut plugin = world.spawn();
    // The plugin serves its sockets while no kubelet exists.
    let deadline = tokio::time::Instant::now() + WAIT;
    while world.plugin_sockets().len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "sockets never appeared: {}",
            plugin.log()
        );
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kubelet = world.kubelet().await;
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    assert!(plugin.wait(Duration::ZERO).await.is_none());
}

#[tokio::test]
async fn sigterm_ends_streams_removes_sockets_and_exits_zero() {
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    kubelet.wait_registered(TUN, 1, WAIT).await.unwrap();
    assert_eq!(world.plugin_sockets().len(), 2);

    let status = plugin.terminate().await;
    assert!(status.success(), "exit status {status:?}\n{}", plugin.log());
    assert!(
        world.plugin_sockets().is_empty(),
        "{:?}",
        world.plugin_sockets()
    );
    // The kubelet saw the streams end (devices turn Unhealthy).
    kubelet
        .wait_for("streams to end", WAIT, |s| {
            s.plugins.values().all(|p| !p.streaming)
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn bad_config_refuses_to_start_and_names_the_culprit() {
    let cases = [
        (
            "unknown key",
            "version = 1\nresource = \"a.example.com/x\"\nreplica = 2\n[[nodes]]\npath = \"/dev/fuse\"\n",
            "replica",
        ),
        (
            "bad toml",
            "version = 1\nresource = \"a.example.com/x\n",
            "bad.toml",
        ),
        (
            "reserved name",
            "version = 1\nresource = \"kubernetes.io/x\"\n[[nodes]]\npath = \"/dev/fuse\"\n",
            "resource",
        ),
        (
            "missing path",
            "version = 1\nresource = \"a.example.com/x\"\n[[nodes]]\npath = \"/dev/not-here\"\n",
            "/dev/not-here",
        ),
        (
            "missing guest",
            "version = 1\nresource = \"a.example.com/x\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.allocate]\nguest = \"guests/none.wasm\"\n",
            "guests/none.wasm",
        ),
    ];
    for (what, text, culprit) in cases {
        let world = World::new();
        world.add_node("/dev/fuse");
        world.write_config("bad.toml", text);
        let root = world.root();
        let config = world.config();
        let plugins = world.plugins();
        let (code, _, stderr) = run_to_end(&[
            "run",
            "--config-dir",
            config.to_str().unwrap(),
            "--device-plugin-dir",
            plugins.to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{what}: started anyway");
        assert!(stderr.contains("bad.toml"), "{what}: {stderr}");
        assert!(stderr.contains(culprit), "{what}: {stderr}");
        assert!(world.plugin_sockets().is_empty(), "{what}: half-started");

        let (code, _, check_err) = run_to_end(&[
            "check",
            "--config-dir",
            config.to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{what}: check passed");
        assert!(check_err.contains(culprit), "{what}: {check_err}");
    }
}

#[tokio::test]
async fn unwritable_plugin_folder_is_refused() {
    let world = World::new();
    two_resources(&world);
    let missing = world.tmp.path().join("no-such-folder");
    let (code, _, stderr) = run_to_end(&[
        "run",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--device-plugin-dir",
        missing.to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_ne!(code, 0);
    assert!(stderr.contains("no-such-folder"), "{stderr}");
}

#[tokio::test]
async fn check_prints_what_each_resource_advertises() {
    let world = World::new();
    two_resources(&world);
    let (code, stdout, stderr) = run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(FUSE) && stdout.contains(TUN), "{stdout}");
    assert!(stdout.contains("fuse::3 Healthy /dev/fuse"), "{stdout}");
    assert!(stdout.contains("net-tun Healthy /dev/net/tun"), "{stdout}");
}

#[tokio::test]
async fn a_vanishing_node_reaches_the_kubelet_without_waiting_for_a_poll() {
    let world = World::new();
    world.add_node("/dev/hot0");
    world.add_node("/dev/fuse");
    // Polling every minute: only the inotify event can explain an update.
    world.write_config(
        "hot.toml",
        "version = 1\nresource = \"e2e.example.com/hot\"\npoll-interval-ms = 60000\n[[nodes]]\npath = \"/dev/hot*\"\n[[nodes]]\npath = \"/dev/fuse\"\n",
    );
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    kubelet
        .wait_registered("e2e.example.com/hot", 1, WAIT)
        .await
        .unwrap();
    for node in ["/dev/hot0", "/dev/fuse"] {
        world.remove_node(node);
        let id = node.trim_start_matches("/dev/");
        kubelet
            .wait_devices("e2e.example.com/hot", WAIT, |d| {
                d.iter().any(|d| d.id == id && d.health == "Unhealthy")
            })
            .await
            .unwrap_or_else(|e| panic!("{node}: {e}\n{}", plugin.log()));
        world.add_node(node);
        kubelet
            .wait_devices("e2e.example.com/hot", WAIT, |d| {
                d.iter().all(|d| d.health == "Healthy")
            })
            .await
            .unwrap_or_else(|e| panic!("{node} back: {e}\n{}", plugin.log()));
    }
}

#[tokio::test]
async fn demo_without_built_guests_says_how_to_build_them() {
    // The shipped configuration as a fresh checkout has it: no config/guests/.
    let world = World::new();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
    for entry in std::fs::read_dir(shipped).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "toml") {
            std::fs::copy(entry.path(), world.config().join(entry.file_name())).unwrap();
        }
    }
    let (code, _, stderr) = run_to_end(&[
        "demo",
        "--once",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "the demo ran without its guests");
    assert!(stderr.contains("presence-health.wasm"), "{stderr}");
    assert!(stderr.contains("bash guests/build.sh"), "{stderr}");
}
