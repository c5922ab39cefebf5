//! What the passthrough tests share: a fixture copy under a temp host
//! root with the kernel stand-in running on it, a binder and a journal.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use wdp_passthrough::{BindSettings, Binder, FileJournal, Journal};
use wdp_test_support::fixtures::{copy_fixture, repo_root, under_root, write_under_root};
use wdp_test_support::kernel_standin::KernelStandin;

/// A host root with the kernel stand-in, a binder and a file journal.
pub struct World {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub standin: KernelStandin,
    pub binder: Binder,
    pub journal: FileJournal,
}

impl World {
    /// `fixture` copied to a temp dir, changed by `prepare` before the
    /// stand-in starts, binds with a `deadline`.
    pub fn new(fixture: &str, deadline: Duration, prepare: impl FnOnce(&Path)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        if fixture == "h100-vm" {
            unpack_h100(&root);
        } else {
            copy_fixture(fixture, &root);
        }
        prepare(&root);
        let standin = KernelStandin::start(&root);
        let binder = Binder::new(&root, BindSettings { deadline });
        let journal = FileJournal::open(dir.path().join("state/passthrough.json")).unwrap();
        Self {
            dir,
            root,
            standin,
            binder,
            journal,
        }
    }

    /// vfio-host with group 30 on native drivers: the GPU on `nvidia`,
    /// its audio function on `snd_hda_intel` (and no `/dev/vfio/30`).
    pub fn vfio_host_native(deadline: Duration) -> Self {
        let world = Self::new("vfio-host", deadline, |_| {});
        world.standin.set_driver(GPU, Some("nvidia"));
        world.standin.set_driver(AUDIO, Some("snd_hda_intel"));
        assert!(!world.exists("/dev/vfio/30"));
        world
    }

    pub fn driver(&self, address: &str) -> Option<String> {
        self.standin.driver(address)
    }

    pub fn exists(&self, host: &str) -> bool {
        under_root(&self.root, host).exists()
    }

    pub fn read(&self, host: &str) -> String {
        std::fs::read_to_string(under_root(&self.root, host)).unwrap()
    }

    pub fn records(&self) -> Vec<wdp_passthrough::GroupRecord> {
        self.journal.records().unwrap()
    }

    pub fn journal_path(&self) -> PathBuf {
        self.journal.path().to_path_buf()
    }
}

pub const GPU: &str = "0000:17:00.0";
pub const AUDIO: &str = "0000:17:00.1";

/// No claim holds anything.
pub fn nobody(_: &str) -> Option<String> {
    None
}

/// Unpacks the recorded H100 VM into `root`.
pub fn unpack_h100(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let tarball = repo_root().join("tests/fixtures/real-nodes/h100-vm.tgz");
    let status = std::process::Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(root)
        .arg("--strip-components=1")
        .status()
        .unwrap();
    assert!(status.success());
}

/// Gives the H100 VM's GPU the IOMMU group a kernel with the IOMMU on
/// would show: group 5, the GPU alone in it.
pub fn add_h100_group(root: &Path) {
    let gpu = "sys/devices/pci0000:00/0000:00:06.0";
    std::fs::create_dir_all(root.join("sys/kernel/iommu_groups/5/devices")).unwrap();
    std::os::unix::fs::symlink(
        "../../../kernel/iommu_groups/5",
        root.join(gpu).join("iommu_group"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../../../../devices/pci0000:00/0000:00:06.0",
        root.join("sys/kernel/iommu_groups/5/devices/0000:00:06.0"),
    )
    .unwrap();
}

/// Adds a PCI function at `address` below root port `0000:16:00.0` of
/// vfio-host, alone in IOMMU group `group`, on `driver`.
pub fn add_function(root: &Path, address: &str, class: &str, group: &str, driver: &str) {
    let rel = format!("sys/devices/pci0000:16/0000:16:00.0/{address}");
    let dir = root.join(&rel);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, value) in [("class", class), ("vendor", "0x144d"), ("device", "0xa80a")] {
        std::fs::write(dir.join(name), format!("{value}\n")).unwrap();
    }
    std::os::unix::fs::symlink(
        format!("../../../../bus/pci/drivers/{driver}"),
        dir.join("driver"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        format!("../../../../kernel/iommu_groups/{group}"),
        dir.join("iommu_group"),
    )
    .unwrap();
    std::os::unix::fs::symlink(
        format!("../../../devices/pci0000:16/0000:16:00.0/{address}"),
        root.join("sys/bus/pci/devices").join(address),
    )
    .unwrap();
    let group_dir = root.join(format!("sys/kernel/iommu_groups/{group}/devices"));
    std::fs::create_dir_all(&group_dir).unwrap();
    std::os::unix::fs::symlink(
        format!("../../../../devices/pci0000:16/0000:16:00.0/{address}"),
        group_dir.join(address),
    )
    .unwrap();
    let drivers = root.join("sys/bus/pci/drivers").join(driver);
    std::fs::create_dir_all(&drivers).unwrap();
    std::os::unix::fs::symlink(
        format!("../../../../devices/pci0000:16/0000:16:00.0/{address}"),
        drivers.join(address),
    )
    .unwrap();
}

/// Adds an NVMe controller `0000:18:00.0` (group 40, driver `nvme`) to
/// vfio-host with disk `nvme0n1` (`259:0`) and partition `nvme0n1p1`
/// (`259:1`).
pub fn add_nvme(root: &Path) {
    add_function(root, NVME, "0x010802", "40", "nvme");
    let disk = format!("sys/devices/pci0000:16/0000:16:00.0/{NVME}/nvme/nvme0/nvme0n1");
    write_under_root(root, &format!("{disk}/dev"), "259:0\n");
    write_under_root(
        root,
        &format!("{disk}/uevent"),
        "MAJOR=259\nMINOR=0\nDEVNAME=nvme0n1\nDEVTYPE=disk\n",
    );
    write_under_root(root, &format!("{disk}/nvme0n1p1/dev"), "259:1\n");
    write_under_root(
        root,
        &format!("{disk}/nvme0n1p1/uevent"),
        "MAJOR=259\nMINOR=1\nDEVNAME=nvme0n1p1\nDEVTYPE=partition\n",
    );
    write_under_root(root, "proc/1/mountinfo", MOUNTS);
    write_under_root(
        root,
        "proc/swaps",
        "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
    );
}

pub const NVME: &str = "0000:18:00.0";

/// The node's mounts, none from the NVMe disk.
pub const MOUNTS: &str = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
    23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n";

/// The network files of the host's first process: nothing on `eno1`.
pub fn write_net(root: &Path, if_inet6: &str, route: &str) {
    write_under_root(
        root,
        "proc/1/net/if_inet6",
        format!("00000000000000000000000000000001 01 80 10 80       lo\n{if_inet6}"),
    );
    write_under_root(
        root,
        "proc/1/net/route",
        format!(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
             eno2\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n{route}"
        ),
    );
    write_under_root(root, "proc/1/net/ipv6_route", "");
}

/// The sysfs folder of gpu-server's `eno1`.
pub const ENO1: &str = "sys/bus/pci/devices/0000:09:00.0/net/eno1";
