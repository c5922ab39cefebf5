//! The host's refusals, each on a fixture copy changed to show it: the
//! error names the device, the function and the reason, and nothing is
//! written.

mod support;

use std::path::Path;
use std::time::Duration;

use support::{AUDIO, ENO1, GPU, NVME, World, add_function, add_nvme, nobody, write_net};
use wdp_passthrough::{BindSettings, Binder, RefusalReason};
use wdp_test_support::fixtures::write_under_root;

const DEADLINE: Duration = Duration::from_secs(10);
const NIC: &str = "0000:09:00.0";

/// The refusal's words for planning `device` in `world`, after checking
/// nothing was written.
fn refused(world: &World, device: &str) -> String {
    let refusal = world.binder.plan(device, "vfio-pci", &nobody).unwrap_err();
    assert!(world.standin.writes().is_empty());
    refusal.to_string()
}

#[test]
fn the_boot_display_is_refused_and_so_is_its_group() {
    let world = World::new("vfio-host", DEADLINE, |root| {
        write_under_root(root, &format!("sys/bus/pci/devices/{GPU}/boot_vga"), "1\n");
    });
    assert_eq!(
        refused(&world, GPU),
        "0000:17:00.0 (IOMMU group 30): it is the boot display (boot_vga = 1)"
    );
    assert_eq!(
        refused(&world, AUDIO),
        "0000:17:00.0 (in IOMMU group 30 of 0000:17:00.1): it is the boot display (boot_vga = 1)"
    );
}

#[test]
fn a_display_that_is_not_the_boot_one_binds() {
    let world = World::new("vfio-host", DEADLINE, |root| {
        write_under_root(root, &format!("sys/bus/pci/devices/{GPU}/boot_vga"), "0\n");
    });
    world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
}

/// gpu-server with eno1's flags, and the host's network files.
fn nic_world(flags: &str, if_inet6: &str, route: &str) -> World {
    let (flags, if_inet6, route) = (flags.to_owned(), if_inet6.to_owned(), route.to_owned());
    World::new("gpu-server", DEADLINE, move |root| {
        write_under_root(root, &format!("{ENO1}/flags"), format!("{flags}\n"));
        write_net(root, &if_inet6, &route);
    })
}

#[test]
fn a_nic_that_is_up_is_refused() {
    let world = nic_world("0x1003", "", "");
    assert_eq!(
        refused(&world, NIC),
        "0000:09:00.0 (IOMMU group 35): network interface eno1 is up"
    );
}

#[test]
fn a_nic_that_is_down_but_addressed_is_refused() {
    let world = nic_world(
        "0x1002",
        "20010db8000000000000000000000005 02 40 00 80     eno1\n",
        "",
    );
    assert_eq!(
        refused(&world, NIC),
        "0000:09:00.0 (IOMMU group 35): network interface eno1 carries address 2001:db8::5/64"
    );
}

#[test]
fn a_nic_that_is_down_but_routed_is_refused() {
    let world = nic_world(
        "0x1002",
        "",
        "eno1\t0002A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n",
    );
    assert_eq!(
        refused(&world, NIC),
        "0000:09:00.0 (IOMMU group 35): network interface eno1 carries a route (192.168.2.0/24)"
    );
}

#[test]
fn a_nic_whose_state_cannot_be_read_is_refused() {
    // As the fixture has it: eno1 with an ifindex only.
    let world = World::new("gpu-server", DEADLINE, |_| {});
    assert_eq!(
        refused(&world, NIC),
        "0000:09:00.0 (IOMMU group 35): cannot tell whether it is in use: the state of network interface eno1 cannot be read (no flags or operstate)"
    );
}

#[test]
fn a_nic_that_is_down_unaddressed_and_unrouted_binds_and_comes_back() {
    let world = nic_world("0x1002", "", "");
    let plan = world.binder.plan(NIC, "vfio-pci", &nobody).unwrap();
    world
        .binder
        .bind("claim-nic", &plan, &world.journal)
        .unwrap();
    assert_eq!(world.driver(NIC).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/35"));
    let record = world.records().remove(0);
    world.binder.restore(&record, &world.journal).unwrap();
    assert_eq!(world.driver(NIC).as_deref(), Some("igb"));
}

#[test]
fn a_group_holding_a_nic_that_is_up_is_refused() {
    // eno1's function in the GPU's group, as a board without ACS has it.
    let world = World::new("gpu-server", DEADLINE, |root| {
        write_under_root(root, &format!("{ENO1}/flags"), "0x1003\n");
        write_net(root, "", "");
        let nic = "sys/devices/pci0000:00/0000:00:1c.0/0000:09:00.0";
        std::fs::remove_file(root.join(nic).join("iommu_group")).unwrap();
        std::os::unix::fs::symlink(
            "../../../../kernel/iommu_groups/13",
            root.join(nic).join("iommu_group"),
        )
        .unwrap();
        std::fs::rename(
            root.join("sys/kernel/iommu_groups/35/devices/0000:09:00.0"),
            root.join("sys/kernel/iommu_groups/13/devices/0000:09:00.0"),
        )
        .unwrap();
    });
    assert_eq!(
        refused(&world, "0000:03:00.0"),
        "0000:09:00.0 (in IOMMU group 13 of 0000:03:00.0): network interface eno1 is up"
    );
}

/// vfio-host with an NVMe controller, changed by `change`.
fn nvme_world(change: impl FnOnce(&Path)) -> World {
    World::new("vfio-host", DEADLINE, |root| {
        add_nvme(root);
        change(root);
    })
}

#[test]
fn an_nvme_disk_with_a_mounted_partition_is_refused() {
    let world = nvme_world(|root| {
        let mounts = format!(
            "{}24 22 259:1 / /data rw,relatime shared:2 - xfs /dev/nvme0n1p1 rw\n",
            support::MOUNTS
        );
        write_under_root(root, "proc/1/mountinfo", mounts);
    });
    assert_eq!(
        refused(&world, NVME),
        "0000:18:00.0 (IOMMU group 40): block device nvme0n1p1 is mounted on /data"
    );
}

#[test]
fn an_nvme_disk_under_a_mounted_device_mapper_volume_is_refused() {
    let world = nvme_world(|root| {
        write_under_root(root, "sys/devices/virtual/block/dm-0/dev", "253:0\n");
        write_under_root(root, "sys/devices/virtual/block/dm-0/dm/name", "vg-data\n");
        let part = root.join(format!(
            "sys/devices/pci0000:16/0000:16:00.0/{NVME}/nvme/nvme0/nvme0n1/nvme0n1p1"
        ));
        std::fs::create_dir_all(part.join("holders")).unwrap();
        std::os::unix::fs::symlink(
            "../../../../../../../../virtual/block/dm-0",
            part.join("holders/dm-0"),
        )
        .unwrap();
        assert!(part.join("holders/dm-0/dev").exists());
        // As btrfs shows it: an anonymous device number, the source by name.
        let mounts = format!(
            "{}24 22 0:45 / /srv rw shared:2 - btrfs /dev/mapper/vg-data rw\n",
            support::MOUNTS
        );
        write_under_root(root, "proc/1/mountinfo", mounts);
    });
    assert_eq!(
        refused(&world, NVME),
        "0000:18:00.0 (IOMMU group 40): block device dm-0 is mounted on /srv"
    );
}

#[test]
fn an_nvme_partition_used_as_swap_is_refused() {
    let world = nvme_world(|root| {
        write_under_root(
            root,
            "proc/swaps",
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/nvme0n1p1                          partition\t8388604\t\t0\t\t-2\n",
        );
    });
    assert_eq!(
        refused(&world, NVME),
        "0000:18:00.0 (IOMMU group 40): block device nvme0n1p1 is used as swap"
    );
}

#[test]
fn an_nvme_disk_nothing_uses_binds_and_comes_back() {
    let world = nvme_world(|_| {});
    let plan = world.binder.plan(NVME, "vfio-pci", &nobody).unwrap();
    world
        .binder
        .bind("claim-nvme", &plan, &world.journal)
        .unwrap();
    assert_eq!(world.driver(NVME).as_deref(), Some("vfio-pci"));
    let record = world.records().remove(0);
    world.binder.restore(&record, &world.journal).unwrap();
    assert_eq!(world.driver(NVME).as_deref(), Some("nvme"));
}

#[test]
fn an_nvme_disk_whose_mounts_cannot_be_read_is_refused() {
    let world = nvme_world(|root| {
        std::fs::remove_file(root.join("proc/1/mountinfo")).unwrap();
    });
    assert_eq!(
        refused(&world, NVME),
        "0000:18:00.0 (IOMMU group 40): cannot tell whether it is in use: reading /proc/1/mountinfo: it does not exist"
    );
}

#[test]
fn a_group_holding_a_function_of_another_claim_is_refused() {
    let world = World::new("vfio-host", DEADLINE, |_| {});
    let held = |address: &str| (address == AUDIO).then(|| "claim-b".to_owned());
    let refusal = world.binder.plan(GPU, "vfio-pci", &held).unwrap_err();
    assert_eq!(
        *refusal.reason,
        RefusalReason::HeldByClaim("claim-b".into())
    );
    assert_eq!(
        refusal.to_string(),
        "0000:17:00.1 (in IOMMU group 30 of 0000:17:00.0): held by claim claim-b"
    );
}

#[test]
fn bridges_in_a_group_stay_on_their_driver() {
    // A group with the root port in it: it stays on pcieport.
    let world = World::new("vfio-host", DEADLINE, |root| {
        add_function(root, "0000:18:00.0", "0x060400", "30", "pcieport");
    });
    world.standin.set_driver(GPU, Some("nvidia"));
    world.standin.set_driver(AUDIO, Some("snd_hda_intel"));
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let bridge = plan
        .functions
        .iter()
        .find(|f| f.address == "0000:18:00.0")
        .unwrap();
    assert!(bridge.bridge);
    world.binder.bind("claim-a", &plan, &world.journal).unwrap();
    assert_eq!(world.driver("0000:18:00.0").as_deref(), Some("pcieport"));
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/30"));
    assert_eq!(world.records()[0].functions.len(), 2);
}

#[test]
fn no_such_device_and_a_target_not_loaded_are_refused() {
    let world = World::new("vfio-host", DEADLINE, |_| {});
    assert_eq!(
        refused(&world, "0000:99:00.0"),
        "0000:99:00.0: no such PCI function (no /sys/bus/pci/devices/0000:99:00.0)"
    );
    assert_eq!(
        refused(&world, "../../etc"),
        "../../etc: no such PCI function (no /sys/bus/pci/devices/../../etc)"
    );
    // Without the stand-in, the recorded H100 with the IOMMU on has no vfio-pci.
    let dir = tempfile::tempdir().unwrap();
    support::unpack_h100(dir.path());
    support::add_h100_group(dir.path());
    let binder = Binder::new(dir.path(), BindSettings::default());
    let refusal = binder
        .plan("0000:00:06.0", "vfio-pci", &nobody)
        .unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "0000:00:06.0 (IOMMU group 5): driver vfio-pci is not loaded (no /sys/bus/pci/drivers/vfio-pci: modprobe vfio-pci)"
    );
}
