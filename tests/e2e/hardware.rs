//! Built-in selectors through the real binary: fixture host trees (SR-IOV
//! NIC, USB, FPGA) and the real `/sys` and `/dev` of the machine running
//! the tests. Paths handed to the kubelet are host paths.

use std::collections::BTreeSet;

use crate::support::{Plugin, WAIT, World, run_to_end};

#[tokio::test]
async fn vfio_bound_vfs_are_handed_out_with_their_vfio_group_node() {
    let world = World::from_fixture("sriov-nic");
    world.write_config(
        "vf.toml",
        "version = 1\nresource = \"e2e.example.com/cx6-vfio\"\n[[pci]]\nvendor = \"15b3\"\ndevice = \"101e\"\ndriver = \"vfio-pci\"\n",
    );
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    let record = kubelet
        .wait_registered("e2e.example.com/cx6-vfio", 1, WAIT)
        .await
        .unwrap();
    let ids: Vec<&str> = record.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["0000:3b:00.4", "0000:3b:00.5"]);
    let admission = kubelet.admit("e2e.example.com/cx6-vfio", 2).await.unwrap();
    let paths: BTreeSet<&str> = admission
        .response
        .devices
        .iter()
        .map(|d| d.host_path.as_str())
        .collect();
    // The host adds the VFIO container node itself: a group node is
    // unusable without it.
    assert_eq!(
        paths,
        BTreeSet::from(["/dev/vfio/43", "/dev/vfio/44", "/dev/vfio/vfio"])
    );
}

#[tokio::test]
async fn usb_devices_by_id_get_their_bus_nodes() {
    let world = World::from_fixture("usb");
    world.write_config(
        "ftdi.toml",
        "version = 1\nresource = \"e2e.example.com/ftdi\"\n[[usb]]\nvendor = \"0403\"\nproduct = \"6001\"\nserial = \"A50285BI\"\n",
    );
    world.write_config(
        "coral.toml",
        "version = 1\nresource = \"e2e.example.com/coral\"\n[[usb]]\nvendor = \"1a6e\"\nproduct = \"089a\"\n",
    );
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    let ftdi = kubelet
        .wait_registered("e2e.example.com/ftdi", 1, WAIT)
        .await
        .unwrap();
    assert_eq!(ftdi.healthy_ids(), ["1-1.2"]);
    let coral = kubelet
        .wait_registered("e2e.example.com/coral", 1, WAIT)
        .await
        .unwrap();
    assert_eq!(coral.healthy_ids(), ["2-1"]);
    let admission = kubelet.admit("e2e.example.com/ftdi", 1).await.unwrap();
    assert_eq!(
        admission.response.devices[0].host_path,
        "/dev/bus/usb/001/003"
    );

    // Unplug the adapter: Unhealthy; plug it back: Healthy.
    let link = world.root().join("sys/bus/usb/devices/1-1.2");
    let target = std::fs::read_link(&link).unwrap();
    std::fs::remove_file(&link).unwrap();
    kubelet
        .wait_devices("e2e.example.com/ftdi", WAIT, |d| {
            d.iter().all(|d| d.health == "Unhealthy")
        })
        .await
        .unwrap();
    std::os::unix::fs::symlink(target, &link).unwrap();
    kubelet
        .wait_devices("e2e.example.com/ftdi", WAIT, |d| {
            d.iter().all(|d| d.health == "Healthy")
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn fpga_by_class_carries_its_dri_nodes() {
    let world = World::from_fixture("fpga");
    world.write_config(
        "fpga.toml",
        "version = 1\nresource = \"e2e.example.com/alveo\"\n[[pci]]\nvendor = \"10ee\"\nclass = \"0x1200\"\n",
    );
    let (code, stdout, stderr) = run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("/dev/dri/renderD128"), "{stdout}");
    assert!(
        !stdout.contains(world.root().to_str().unwrap()),
        "a path kept the host root:\n{stdout}"
    );
}

/// Every PCI function of this machine, as sysfs lists it.
fn real_pci_functions() -> BTreeSet<String> {
    std::fs::read_dir("/sys/bus/pci/devices")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_real_machine_is_read_as_sysfs_and_devfs_describe_it() {
    let world = World::new();
    world.write_config(
        "all-pci.toml",
        "version = 1\nresource = \"e2e.example.com/all-pci\"\nget-preferred-allocation = false\n[[pci]]\n",
    );
    world.write_config(
        "null.toml",
        "version = 1\nresource = \"e2e.example.com/null\"\n[[nodes]]\npath = \"/dev/null\"\n",
    );
    let kubelet = world.kubelet().await;
    let (config, plugins) = (world.config(), world.plugins());
    let _plugin = Plugin::spawn(
        &[
            "run",
            "--config-dir",
            config.to_str().unwrap(),
            "--device-plugin-dir",
            plugins.to_str().unwrap(),
            "--host-root",
            "/",
        ],
        world.tmp.path(),
    );
    let expected = real_pci_functions();
    let null = kubelet
        .wait_registered("e2e.example.com/null", 1, WAIT)
        .await
        .unwrap();
    assert_eq!(null.healthy_ids(), ["null"]);
    let admission = kubelet.admit("e2e.example.com/null", 1).await.unwrap();
    assert_eq!(admission.response.devices[0].host_path, "/dev/null");
    if expected.is_empty() {
        // No PCI bus here (some containers): nothing to compare, and the
        // resource must then advertise nothing.
        eprintln!("this machine has no /sys/bus/pci: comparing an empty set");
    }
    let pci = kubelet
        .wait_registered("e2e.example.com/all-pci", 1, WAIT)
        .await
        .unwrap();
    let seen: BTreeSet<String> = pci.devices.iter().map(|d| d.id.clone()).collect();
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn a_recorded_snapshot_serves_as_a_host_root() {
    let world = World::from_fixture("sriov-nic");
    world.write_config(
        "vf.toml",
        "version = 1\nresource = \"e2e.example.com/cx6-vf\"\n[[pci]]\nvendor = \"15b3\"\ndevice = \"101e\"\n",
    );
    let snapshot = world.tmp.path().join("snapshot");
    let (code, stdout, stderr) = run_to_end(&[
        "record",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
        "--output",
        snapshot.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("4 candidates recorded"), "{stdout}");
    let check = |root: &std::path::Path| {
        let (code, stdout, stderr) = run_to_end(&[
            "check",
            "--config-dir",
            world.config().to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        stdout
    };
    assert_eq!(check(&snapshot), check(&world.root()));
}

#[tokio::test]
async fn companion_nodes_reach_every_container_and_their_absence_is_unhealthy() {
    let world = World::from_fixture("gpu-server");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        "version = 1\nresource = \"e2e.example.com/gpu\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
         [[companion-nodes]]\npath = \"/dev/nvidiactl\"\n\
         [[companion-nodes]]\npath = \"/dev/nvidia-uvm*\"\n",
    );
    // `check` names the companions and advertises none of them.
    let (code, out, err) = run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("companion /dev/nvidiactl"), "{out}");
    assert!(out.contains("companion /dev/nvidia-uvm"), "{out}");
    assert!(out.contains("8 devices (8 healthy)"), "{out}");

    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    kubelet
        .wait_registered("e2e.example.com/gpu", 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let admission = kubelet.admit("e2e.example.com/gpu", 2).await.unwrap();
    let paths: Vec<&str> = admission
        .response
        .devices
        .iter()
        .map(|d| d.host_path.as_str())
        .collect();
    assert_eq!(paths.len(), 5, "{paths:?}");
    assert!(
        paths.ends_with(&["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]),
        "{paths:?}"
    );

    // A required companion that goes: every device Unhealthy, saying why.
    world.remove_node("/dev/nvidiactl");
    kubelet
        .wait_devices("e2e.example.com/gpu", WAIT, |d| {
            d.iter().all(|d| d.health == "Unhealthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let log = plugin
        .wait_for_log("companion node /dev/nvidiactl is missing")
        .await;
    assert!(log.contains("WARN"), "{log}");
}

/// Unset, `get-preferred-allocation` follows the devices: GPUs on two NUMA
/// nodes are worth packing (offered); once the resource's GPUs are all on
/// one node, any pick is as good, so it registers again without it (a
/// round trip less per container).
#[tokio::test]
async fn preferred_allocation_is_offered_while_the_devices_span_numa_nodes() {
    let world = World::from_fixture("gpu-server");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        "version = 1\nresource = \"e2e.example.com/gpu\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n",
    );
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    let first = kubelet
        .wait_registered("e2e.example.com/gpu", 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert!(
        first
            .registration
            .options
            .unwrap()
            .get_preferred_allocation_available,
        "GPUs on NUMA nodes 0 and 1"
    );
    let admission = kubelet.admit("e2e.example.com/gpu", 2).await.unwrap();
    assert_eq!(admission.preferred.as_ref().map(Vec::len), Some(2));
    kubelet.release("e2e.example.com/gpu", &admission.devices);

    // The resource narrowed to the NUMA node 0 GPUs (a live reload; the
    // registration options in the file did not change, the devices did).
    world.write_config(
        "gpu.toml",
        "version = 1\nresource = \"e2e.example.com/gpu\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\naddress = \"0000:0*\"\n",
    );
    let state = kubelet
        .wait_for("a registration without GetPreferredAllocation", WAIT, |s| {
            s.plugins.get("e2e.example.com/gpu").is_some_and(|p| {
                p.registrations >= 2
                    && !p
                        .registration
                        .options
                        .unwrap()
                        .get_preferred_allocation_available
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert!(state.refusals.is_empty(), "{:?}", state.refusals);
    kubelet
        .wait_devices("e2e.example.com/gpu", WAIT, |d| {
            d.iter().filter(|d| d.health == "Healthy").count() == 4
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let admission = kubelet.admit("e2e.example.com/gpu", 2).await.unwrap();
    assert_eq!(
        admission.preferred, None,
        "GetPreferredAllocation was called"
    );
    assert_eq!(admission.response.devices.len(), 2);
}
