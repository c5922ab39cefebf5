//! Odd sysfs entries, hot-unplug/re-plug, and the change watcher, on
//! writable copies of the fixture trees.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{find, fixture_copy, ids, node_paths};
use wdp_hardware::{
    ChangeWatcher, HostRoot, NodeSelector, PciSelector, Scan, Selector, UsbSelector, discover,
    discover_cached, scan_pci, scan_usb, watch_paths,
};

const GPU0: &str = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0";
const GPU1: &str = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0";
const GPU2: &str = "sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0/0000:06:08.0/0000:07:00.0";
const GPU3: &str = "sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0/0000:06:10.0/0000:08:00.0";

fn gpus() -> Selector {
    Selector::Pci(PciSelector {
        vendor: Some("10de".into()),
        class: Some("0x0302".into()),
        ..Default::default()
    })
}

/// The single warning naming `path` (a host path); fails otherwise.
fn warning_for<'a>(scan: &'a Scan, path: &str) -> &'a str {
    let hits: Vec<&String> = scan.warnings.iter().filter(|w| w.contains(path)).collect();
    assert_eq!(hits.len(), 1, "warnings for {path}: {:?}", scan.warnings);
    hits[0]
}

fn assert_no_root(scan: &Scan, root: &HostRoot) {
    let root = root.path().to_string_lossy().into_owned();
    for w in &scan.warnings {
        assert!(!w.contains(&root), "warning shows the root: {w}");
    }
}

#[test]
fn missing_or_bad_vendor_skips_the_function() {
    let (dir, root) = fixture_copy("gpu-server");
    std::fs::remove_file(dir.path().join(GPU0).join("vendor")).unwrap();
    std::fs::write(dir.path().join(GPU1).join("vendor"), "0xnvidia\n").unwrap();
    let scan = scan_pci(&root);
    assert_eq!(scan.candidates.len(), 26);
    assert!(!ids(&scan).contains(&"0000:03:00.0"));
    assert!(!ids(&scan).contains(&"0000:04:00.0"));
    let w = warning_for(&scan, &format!("/{GPU0}/vendor"));
    assert!(w.contains("missing"), "{w}");
    let w = warning_for(&scan, &format!("/{GPU1}/vendor"));
    assert!(w.contains("0xnvidia"), "{w}");
    assert_eq!(scan.warnings.len(), 2, "{:?}", scan.warnings);
    assert_no_root(&scan, &root);
    assert_eq!(discover(&root, &[gpus()]).unwrap().candidates.len(), 6);
}

#[test]
fn bad_values_leave_the_fact_out() {
    let (dir, root) = fixture_copy("gpu-server");
    std::fs::write(dir.path().join(GPU0).join("device"), "0xZZZZ\n").unwrap();
    std::fs::remove_file(dir.path().join(GPU1).join("class")).unwrap();
    std::fs::write(dir.path().join(GPU2).join("numa_node"), "-1\n").unwrap();
    std::fs::write(dir.path().join(GPU3).join("numa_node"), "zero\n").unwrap();
    let scan = discover(
        &root,
        &[Selector::Pci(PciSelector {
            vendor: Some("10de".into()),
            ..Default::default()
        })],
    )
    .unwrap();
    assert_no_root(&scan, &root);
    assert_eq!(scan.candidates.len(), 9, "nothing skipped");
    let gpu0 = find(&scan, "0000:03:00.0");
    assert!(gpu0.attribute("pci.device").is_none());
    assert_eq!(gpu0.attribute("pci.vendor"), Some("0x10de"));
    assert!(warning_for(&scan, &format!("/{GPU0}/device")).contains("0xZZZZ"));
    assert!(find(&scan, "0000:04:00.0").attribute("pci.class").is_none());
    assert!(warning_for(&scan, &format!("/{GPU1}/class")).contains("missing"));
    // -1 on a two-node machine: locality unknown, and said so.
    let gpu2 = find(&scan, "0000:07:00.0");
    assert!(gpu2.numa_nodes.is_empty() && gpu2.attribute("pci.numa-node").is_none());
    assert!(warning_for(&scan, &format!("/{GPU2}/numa_node")).contains("-1"));
    let gpu3 = find(&scan, "0000:08:00.0");
    assert!(gpu3.numa_nodes.is_empty());
    assert!(warning_for(&scan, &format!("/{GPU3}/numa_node")).contains("zero"));
    assert_eq!(scan.warnings.len(), 4, "{:?}", scan.warnings);
    // The class selector no longer takes the GPU without a class.
    assert_eq!(discover(&root, &[gpus()]).unwrap().candidates.len(), 7);
}

#[test]
fn numa_minus_one_is_normal_on_a_single_node_machine() {
    let (dir, root) = fixture_copy("sriov-nic");
    let pf = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
    std::fs::write(dir.path().join(pf).join("numa_node"), "-1\n").unwrap();
    let scan = scan_pci(&root);
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    assert!(find(&scan, "0000:3b:00.0").numa_nodes.is_empty());
}

#[test]
fn dangling_links() {
    let (dir, root) = fixture_copy("gpu-server");
    // A driver link to a driver that is gone.
    let driver = dir.path().join(GPU0).join("driver");
    std::fs::remove_file(&driver).unwrap();
    std::os::unix::fs::symlink("../../../../../../bus/pci/drivers/nvidia-gone", &driver).unwrap();
    // A dangling iommu_group link.
    let group = dir.path().join(GPU1).join("iommu_group");
    std::fs::remove_file(&group).unwrap();
    std::os::unix::fs::symlink("../../../../../../kernel/iommu_groups/999", &group).unwrap();
    // A bus entry whose device directory is gone.
    std::fs::remove_dir_all(dir.path().join(GPU2)).unwrap();
    // A bus entry that is not a PCI address.
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00",
        dir.path().join("sys/bus/pci/devices/bogus"),
    )
    .unwrap();
    let scan = scan_pci(&root);
    assert_no_root(&scan, &root);
    let gpu0 = find(&scan, "0000:03:00.0");
    assert!(gpu0.attribute("pci.driver").is_none());
    assert!(gpu0.nodes.is_empty(), "no driver, so no nvidia node");
    assert!(warning_for(&scan, &format!("/{GPU0}/driver")).contains("dangling"));
    let gpu1 = find(&scan, "0000:04:00.0");
    assert!(gpu1.attribute("pci.iommu-group").is_none());
    assert_eq!(gpu1.attribute("pci.driver"), Some("nvidia"));
    assert!(warning_for(&scan, &format!("/{GPU1}/iommu_group")).contains("dangling"));
    assert!(!ids(&scan).contains(&"0000:07:00.0"));
    assert!(warning_for(&scan, "/sys/bus/pci/devices/0000:07:00.0").contains("dangling"));
    assert!(warning_for(&scan, "/sys/bus/pci/devices/bogus").contains("not a PCI address"));
    assert_eq!(scan.warnings.len(), 4, "{:?}", scan.warnings);
    let by_driver = discover(
        &root,
        &[Selector::Pci(PciSelector {
            driver: Some("nvidia".into()),
            ..Default::default()
        })],
    )
    .unwrap();
    assert_eq!(by_driver.candidates.len(), 7);
}

#[test]
fn absolute_links_stay_beneath_the_root() {
    let (dir, root) = fixture_copy("gpu-server");
    let bus_link = dir.path().join("sys/bus/pci/devices/0000:03:00.0");
    std::fs::remove_file(&bus_link).unwrap();
    std::os::unix::fs::symlink(format!("/{GPU0}"), &bus_link).unwrap();
    let driver = dir.path().join(GPU0).join("driver");
    std::fs::remove_file(&driver).unwrap();
    std::os::unix::fs::symlink("/sys/bus/pci/drivers/nvidia", &driver).unwrap();
    let scan = discover(&root, &[gpus()]).unwrap();
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    let gpu0 = find(&scan, "0000:03:00.0");
    assert_eq!(gpu0.attribute("pci.driver"), Some("nvidia"));
    assert_eq!(
        gpu0.sysfs_dir.as_deref(),
        Some(Path::new(&format!("/{GPU0}")))
    );
    assert_eq!(node_paths(gpu0), ["/dev/nvidia0"]);
}

#[test]
fn odd_usb_entries() {
    let (dir, root) = fixture_copy("usb");
    let ftdi = dir
        .path()
        .join("sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2");
    let coral = dir
        .path()
        .join("sys/devices/pci0000:00/0000:00:14.0/usb2/2-1");
    std::fs::write(ftdi.join("idVendor"), "zz\n").unwrap();
    std::fs::remove_file(coral.join("idProduct")).unwrap();
    std::fs::write(coral.join("devnum"), "two\n").unwrap();
    let scan = scan_usb(&root);
    assert_no_root(&scan, &root);
    assert_eq!(ids(&scan), ["1-1", "2-1", "usb1", "usb2"]);
    let c = find(&scan, "2-1");
    assert!(c.attribute("usb.product").is_none() && c.attribute("usb.devnum").is_none());
    assert!(c.nodes.is_empty());
    let base = "/sys/devices/pci0000:00/0000:00:14.0";
    assert!(warning_for(&scan, &format!("{base}/usb1/1-1/1-1.2/idVendor")).contains("zz"));
    assert!(warning_for(&scan, &format!("{base}/usb2/2-1/idProduct")).contains("missing"));
    assert!(warning_for(&scan, &format!("{base}/usb2/2-1/devnum")).contains("two"));
    // A product selector cannot match a device without a product ID.
    let none = discover(
        &root,
        &[Selector::Usb(UsbSelector {
            product: Some("089a".into()),
            ..Default::default()
        })],
    )
    .unwrap();
    assert!(none.candidates.is_empty());
}

/// Moves a path out of the tree (to `stash`) and back.
fn unplug(from: &Path, stash: &Path) {
    std::fs::rename(from, stash).unwrap();
}

#[test]
fn hot_unplug_and_replug() {
    let (dir, root) = fixture_copy("gpu-server");
    let stash = tempfile::tempdir().unwrap();
    let before = discover(&root, &[gpus()]).unwrap();
    assert_eq!(before.candidates.len(), 8);

    // The kernel removes the function's directory and its bus entry.
    let bus_link = dir.path().join("sys/bus/pci/devices/0000:07:00.0");
    let target = std::fs::read_link(&bus_link).unwrap();
    unplug(&dir.path().join(GPU2), &stash.path().join("fn"));
    std::fs::remove_file(&bus_link).unwrap();
    let during = discover(&root, &[gpus()]).unwrap();
    assert!(during.warnings.is_empty(), "{:?}", during.warnings);
    assert_eq!(during.candidates.len(), 7);
    assert!(!ids(&during).contains(&"0000:07:00.0"));

    // Re-plug: the same device, the same facts.
    unplug(&stash.path().join("fn"), &dir.path().join(GPU2));
    std::os::unix::fs::symlink(&target, &bus_link).unwrap();
    let after = discover(&root, &[gpus()]).unwrap();
    assert_eq!(after, before);

    // A node disappears and comes back.
    let node = Selector::Nodes(NodeSelector {
        path: "/dev/nvidia*".into(),
        optional: false,
    });
    assert_eq!(
        discover(&root, std::slice::from_ref(&node))
            .unwrap()
            .candidates
            .len(),
        // nvidia0…7, nvidiactl, nvidia-uvm, nvidia-uvm-tools and the
        // NVSwitch's nvidia-nvswitch0 and nvidia-nvswitchctl.
        13
    );
    std::fs::remove_file(dir.path().join("dev/nvidia3")).unwrap();
    let scan = discover(&root, &[node.clone(), gpus()]).unwrap();
    assert_eq!(scan.candidates.len(), 12 + 8);
    assert!(!ids(&scan).contains(&"nvidia3"));
    assert!(
        find(&scan, "0000:08:00.0").nodes.is_empty(),
        "GPU's node gone too"
    );
    std::fs::write(dir.path().join("dev/nvidia3"), b"").unwrap();
    let scan = discover(&root, &[node, gpus()]).unwrap();
    assert_eq!(node_paths(find(&scan, "0000:08:00.0")), ["/dev/nvidia3"]);
}

/// Waits for the next change signal, at most 10 s; returns how long it took.
async fn next_change(rx: &mut wdp_hardware::ChangeReceiver) -> Duration {
    let start = Instant::now();
    let fired = tokio::time::timeout(Duration::from_secs(10), rx.changed())
        .await
        .expect("no change signal within 10 s");
    assert!(fired, "watcher closed");
    start.elapsed()
}

#[tokio::test]
async fn watcher_sees_unplug_and_replug() {
    let (dir, root) = fixture_copy("fpga");
    let selectors = [
        Selector::Pci(PciSelector {
            class: Some("0x1200".into()),
            ..Default::default()
        }),
        Selector::Nodes(NodeSelector {
            path: "/dev/dri/renderD*".into(),
            optional: false,
        }),
    ];
    let scan = discover(&root, &selectors).unwrap();
    assert_eq!(
        ids(&scan),
        ["0000:65:00.0", "0000:65:00.1", "dri-renderD128"]
    );
    let paths = watch_paths(&root, &selectors, &scan.candidates);
    for expected in [
        "/sys/bus/pci/devices",
        "/dev/dri",
        "/sys/devices/pci0000:64/0000:64:00.0/0000:65:00.1",
        "/sys/bus/pci/drivers/xocl",
        "/sys/devices/pci0000:64/0000:64:00.0/0000:65:00.1/drm/renderD128",
    ] {
        assert!(
            paths.contains(&PathBuf::from(expected)),
            "{expected} not in {paths:?}"
        );
    }
    let watcher = ChangeWatcher::new(&root);
    assert!(watcher.set_paths(&paths).is_empty());
    assert_eq!(watcher.watched(), paths);
    let mut rx = watcher.subscribe();

    // The render node disappears.
    let render = dir.path().join("dev/dri/renderD128");
    let start = Instant::now();
    std::fs::remove_file(&render).unwrap();
    next_change(&mut rx).await;
    eprintln!("node removal → change signal: {:?}", start.elapsed());
    let scan = discover(&root, &selectors).unwrap();
    assert!(!ids(&scan).contains(&"dri-renderD128"));
    assert_eq!(node_paths(find(&scan, "0000:65:00.1")), ["/dev/dri/card0"]);

    // It comes back.
    std::fs::write(&render, b"").unwrap();
    next_change(&mut rx).await;
    let scan = discover(&root, &selectors).unwrap();
    assert!(ids(&scan).contains(&"dri-renderD128"));

    // The driver is unbound: its link in the device directory goes.
    let user = dir
        .path()
        .join("sys/devices/pci0000:64/0000:64:00.0/0000:65:00.1");
    std::fs::remove_file(user.join("driver")).unwrap();
    next_change(&mut rx).await;
    let scan = discover(&root, &selectors).unwrap();
    assert!(
        find(&scan, "0000:65:00.1")
            .attribute("pci.driver")
            .is_none()
    );

    // The whole function goes; its watched directory with it.
    std::fs::remove_dir_all(&user).unwrap();
    next_change(&mut rx).await;
    let scan = discover(&root, &selectors).unwrap();
    assert_eq!(scan.candidates.len(), 2, "{:?}", ids(&scan));
    drop(watcher);
    // Changes not yet seen are still reported, then the receiver closes.
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        while rx.changed().await {}
    });
    closed.await.expect("receiver closes with the watcher");
}

#[tokio::test]
async fn watcher_falls_back_to_ancestors_and_moves_down() {
    let (dir, root) = fixture_copy("sriov-nic");
    let watcher = ChangeWatcher::new(&root);
    // /dev/vfio/46 does not exist yet: its parent is watched instead.
    let wanted = [
        PathBuf::from("/dev/vfio/46/x"),
        PathBuf::from("/sys/bus/pci/devices"),
    ];
    assert!(watcher.set_paths(&wanted).is_empty());
    assert_eq!(
        watcher.watched(),
        [
            PathBuf::from("/dev/vfio"),
            PathBuf::from("/sys/bus/pci/devices")
        ]
    );
    let mut rx = watcher.subscribe();
    std::fs::create_dir(dir.path().join("dev/vfio/46")).unwrap();
    next_change(&mut rx).await;
    assert!(watcher.set_paths(&wanted).is_empty());
    assert_eq!(
        watcher.watched(),
        [
            PathBuf::from("/dev/vfio/46"),
            PathBuf::from("/sys/bus/pci/devices")
        ]
    );
    std::fs::write(dir.path().join("dev/vfio/46/x"), b"").unwrap();
    next_change(&mut rx).await;
    // Removing and re-creating a watched directory keeps it watched after
    // the next set_paths.
    std::fs::remove_dir_all(dir.path().join("dev/vfio/46")).unwrap();
    next_change(&mut rx).await;
    std::fs::create_dir(dir.path().join("dev/vfio/46")).unwrap();
    assert!(watcher.set_paths(&wanted).is_empty());
    while rx.take_changed() {}
    let g = watcher.generation();
    std::fs::write(dir.path().join("dev/vfio/46/x"), b"").unwrap();
    next_change(&mut rx).await;
    assert!(watcher.generation() > g);
    // Replacing the set drops the old watches.
    assert!(watcher.set_paths(&[PathBuf::from("/dev")]).is_empty());
    assert_eq!(watcher.watched(), [PathBuf::from("/dev")]);
}

/// A scan through a watcher's listings keeps the listing of a watched
/// directory while nothing changes under it, and after each change the
/// watch reports finds what a full scan finds: nodes made, removed,
/// renamed, and the whole directory replaced by another.
#[tokio::test]
async fn scans_through_the_watch_see_every_change_of_a_node_directory() {
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::create_dir(&dev).unwrap();
    for i in 0..4 {
        std::fs::write(dev.join(format!("acc{i}")), b"").unwrap();
    }
    let root = HostRoot::new(dir.path());
    let selectors = [Selector::Nodes(NodeSelector {
        path: "/dev/acc*".into(),
        optional: false,
    })];
    let watcher = ChangeWatcher::new(&root);
    let listings = watcher.listings();
    // Nothing is watched yet: nothing is kept.
    let scan = discover_cached(&root, &selectors, listings).unwrap();
    assert_eq!(ids(&scan), ["acc0", "acc1", "acc2", "acc3"]);
    assert_eq!(listings.kept_count(), 0);
    let paths = watch_paths(&root, &selectors, &scan.candidates);
    assert!(watcher.set_paths(&paths).is_empty());
    let mut rx = watcher.subscribe();
    discover_cached(&root, &selectors, listings).unwrap();
    assert_eq!(listings.kept_count(), 1, "the watched /dev is kept");

    let old = dir.path().join("dev.old");
    // What is done to the tree, named for the assertion message.
    type Change<'a> = (&'static str, Box<dyn Fn() + 'a>);
    let changes: [Change; 4] = [
        (
            "a node made",
            Box::new(|| std::fs::write(dev.join("acc4"), b"").unwrap()),
        ),
        (
            "a node removed",
            Box::new(|| std::fs::remove_file(dev.join("acc0")).unwrap()),
        ),
        (
            "a node renamed",
            Box::new(|| std::fs::rename(dev.join("acc1"), dev.join("acc9")).unwrap()),
        ),
        (
            "the directory replaced",
            Box::new(|| {
                std::fs::rename(&dev, &old).unwrap();
                std::fs::create_dir(&dev).unwrap();
                std::fs::write(dev.join("acc7"), b"").unwrap();
            }),
        ),
    ];
    for (what, change) in changes {
        while rx.take_changed() {}
        change();
        next_change(&mut rx).await;
        let cached = discover_cached(&root, &selectors, listings).unwrap();
        let full = discover(&root, &selectors).unwrap();
        assert_eq!(ids(&cached), ids(&full), "after {what}");
        let paths = watch_paths(&root, &selectors, &cached.candidates);
        assert!(watcher.set_paths(&paths).is_empty());
    }
    assert_eq!(ids(&discover(&root, &selectors).unwrap()), ["acc7"]);
    // The replacement is watched again, and its listing kept.
    discover_cached(&root, &selectors, listings).unwrap();
    assert_eq!(listings.kept_count(), 1);
    while rx.take_changed() {}
    std::fs::write(dev.join("acc8"), b"").unwrap();
    next_change(&mut rx).await;
    let cached = discover_cached(&root, &selectors, listings).unwrap();
    assert_eq!(ids(&cached), ["acc7", "acc8"]);
}
