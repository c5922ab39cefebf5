//! Administrative device nodes (NVIDIA's MIG configuration and monitor
//! capabilities, the NVSwitch control node, `/dev/mem`, …) never reach a
//! container by accident: a companion that resolves to one is refused by
//! `check`, at start and at reload (the last good state keeps serving), a
//! guest answer that grants one is refused at the call naming the guest,
//! hook and node, and a resource that means it says so by name in
//! `grant-admin-nodes`. What is administrative is what the driver says
//! (`/proc/driver/nvidia/capabilities/*`, the gpu-server fixture's
//! `/proc/devices`), not the path alone.

use crate::common::{WAIT, World, allocate_one};

const GPU: &str = "example.com/gpu";
const MIG_CAPS: &str = "[[companion-nodes]]\npath = \"/dev/nvidia-caps/nvidia-cap*\"\n";

/// The gpu-server fixture (eight GPUs, the MIG capability nodes the driver
/// creates without MIG, and its capability files) with one resource of its
/// GPUs: `top` goes before the tables, `tables` after the control node.
fn gpu_world(top: &str, tables: &str) -> World {
    let world = World::new(Some("gpu-server"));
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    write_gpu(&world, top, tables);
    world
}

fn write_gpu(world: &World, top: &str, tables: &str) {
    world.write_config(
        "gpu.toml",
        &format!(
            "version = 1\nresource = \"{GPU}\"\n{top}\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
             [[companion-nodes]]\npath = \"/dev/nvidiactl\"\n{tables}"
        ),
    );
}

/// The host paths of an admitted container's device specs.
fn host_paths(admission: &wdp_kubelet_sim::Admission) -> Vec<&str> {
    admission
        .response
        .devices
        .iter()
        .map(|d| d.host_path.as_str())
        .collect()
}

#[test]
fn a_companion_resolving_to_the_mig_config_capability_is_refused_naming_resource_and_node() {
    let world = gpu_world("", MIG_CAPS);
    let error = wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string();
    assert!(error.contains("gpu.toml"), "{error}");
    assert!(error.contains("/dev/nvidia-caps/nvidia-cap1"), "{error}");
    assert!(error.contains("nvidia-mig-config"), "{error}");
    // Recognised by what the driver says, and the way out named.
    assert!(
        error.contains("/proc/driver/nvidia/capabilities/mig/config"),
        "{error}"
    );
    assert!(error.contains("grant-admin-nodes"), "{error}");
}

#[test]
fn the_driver_decides_which_capability_node_is_administrative() {
    // A driver that numbered mig/config 7 and mig/monitor 8: nvidia-cap1 is
    // then some MIG instance's access capability, which may be handed out,
    // and nvidia-cap7 is the one refused.
    let world = gpu_world("", "");
    for (cap, minor) in [("config", 7), ("monitor", 8)] {
        world.write_host(
            &format!("/proc/driver/nvidia/capabilities/mig/{cap}"),
            &format!("DeviceFileMinor: {minor}\nDeviceFileMode: 256\nDeviceFileModify: 1\n"),
        );
    }
    world.write_host("/dev/nvidia-caps/nvidia-cap7", "");
    let companion =
        |n: u32| format!("[[companion-nodes]]\npath = \"/dev/nvidia-caps/nvidia-cap{n}\"\n");

    write_gpu(&world, "", &companion(1));
    let reports = wdp_host::check(&world.config(), &world.root()).unwrap();
    assert!(
        reports[0]
            .devices
            .companions()
            .iter()
            .any(|n| n.path == "/dev/nvidia-caps/nvidia-cap1"),
        "{:?}",
        reports[0].devices.companions()
    );

    write_gpu(&world, "", &companion(7));
    let error = wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("nvidia-cap7 is nvidia-mig-config"),
        "{error}"
    );
}

#[test]
fn an_unknown_grant_is_refused_by_file_and_field() {
    let world = gpu_world("grant-admin-nodes = [\"nvidia-cap1\"]", "");
    let error = wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string();
    assert!(error.contains("gpu.toml"), "{error}");
    assert!(error.contains("grant-admin-nodes"), "{error}");
    assert!(error.contains("nvidia-mig-config"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_that_grants_the_mig_capabilities_by_name_hands_them_out() {
    let world = gpu_world(
        "grant-admin-nodes = [\"nvidia-mig-config\", \"nvidia-mig-monitor\"]",
        MIG_CAPS,
    );
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let admission = kubelet.admit(GPU, 1).await.unwrap();
    let paths = host_paths(&admission);
    assert!(paths.contains(&"/dev/nvidia-caps/nvidia-cap1"), "{paths:?}");
    assert!(paths.contains(&"/dev/nvidia-caps/nvidia-cap2"), "{paths:?}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_and_a_reload_adding_an_admin_companion_are_refused_and_the_last_good_state_serves()
{
    let world = gpu_world("", MIG_CAPS);
    let error = wdp_host::Host::start(world.options(), wdp_host::Metrics::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("nvidia-mig-config"), "{error}");

    write_gpu(&world, "", "");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();

    write_gpu(&world, "", MIG_CAPS);
    let error = host.reload().await.unwrap_err().to_string();
    assert!(error.contains("gpu.toml"), "{error}");
    assert!(error.contains("/dev/nvidia-caps/nvidia-cap1"), "{error}");

    let admission = kubelet.admit(GPU, 1).await.unwrap();
    let paths = host_paths(&admission);
    assert_eq!(paths.len(), 2, "the GPU and nvidiactl only: {paths:?}");
    assert!(!paths.iter().any(|p| p.contains("nvidia-cap")), "{paths:?}");
    host.shutdown().await;
}

/// The gpu-server world with `admin-grant.wasm` as its allocate guest,
/// `on-error` as given, granting `grants` and with `guest_config` lines.
fn guest_world(on_error: &str, grants: &str, guest_config: &str) -> World {
    let world = gpu_world(
        grants,
        &format!(
            "[hooks.allocate]\nguest = \"guests/admin-grant.wasm\"\non-error = \"{on_error}\"\n\
             [guest-config]\n{guest_config}"
        ),
    );
    world.install_guest(wdp_guest_artifacts::HOSTILE_ADMIN_GRANT, "admin-grant.wasm");
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_answer_granting_an_admin_node_is_refused_at_the_call() {
    let world = guest_world("fail", "", "");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let id = record.devices[0].id.clone();
    let mut client = kubelet.client(GPU).await.unwrap();
    let status = client.allocate(allocate_one(&id)).await.unwrap_err();
    let message = status.message();
    for part in [
        "admin-grant.wasm",
        "allocate",
        "/dev/nvidia-caps/nvidia-cap1",
        "nvidia-mig-config",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_mounting_the_capability_folder_is_refused_and_builtin_answers_without_it() {
    // on-error = "builtin": the refused answer is replaced by the host's
    // own, which carries no capability node.
    let world = guest_world(
        "builtin",
        "",
        "extra-node = \"/dev/nvidiactl\"\nextra-mount = \"/dev/nvidia-caps\"\n",
    );
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let admission = kubelet.admit(GPU, 1).await.unwrap();
    assert!(admission.response.mounts.is_empty(), "{admission:?}");
    assert_eq!(admission.response.devices.len(), 2, "{admission:?}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_may_grant_what_its_resource_grants() {
    let world = guest_world("fail", "grant-admin-nodes = [\"nvidia-mig-config\"]", "");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let admission = kubelet.admit(GPU, 1).await.unwrap();
    assert!(
        admission
            .response
            .devices
            .iter()
            .any(|d| d.host_path == "/dev/nvidia-caps/nvidia-cap1"),
        "{admission:?}"
    );
    host.shutdown().await;
}

#[test]
fn a_recorded_node_keeps_what_tells_its_admin_nodes_apart() {
    // `record` copies /proc/devices and the capability files, so a
    // snapshot refuses the same companion the node does.
    let world = gpu_world("", "");
    let root = wdp_hardware::HostRoot::new(world.root());
    let scan = wdp_hardware::discover(
        &root,
        &[wdp_hardware::Selector::Nodes(wdp_hardware::NodeSelector {
            path: "/dev/nvidia-caps/nvidia-cap*".into(),
            optional: false,
        })],
    )
    .unwrap();
    let snapshot = world.tmp.path().join("snapshot");
    wdp_hardware::record(&root, &scan.candidates, &snapshot).unwrap();
    for file in [
        "proc/devices",
        "proc/driver/nvidia/capabilities/mig/config",
        "proc/driver/nvidia/capabilities/mig/monitor",
    ] {
        assert!(snapshot.join(file).is_file(), "{file} not recorded");
    }
    let known = wdp_hardware::AdminNodes::read(&wdp_hardware::HostRoot::new(&snapshot));
    let found = known
        .classify(
            &wdp_hardware::HostRoot::new(&snapshot),
            std::path::Path::new("/dev/nvidia-caps/nvidia-cap2"),
        )
        .unwrap();
    assert_eq!(found.kind, wdp_hardware::AdminNodeKind::NvidiaMigMonitor);
    assert!(found.evidence.contains("mig/monitor"), "{}", found.evidence);
}
