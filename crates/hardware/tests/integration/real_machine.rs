//! Discovery on the real `/sys` and `/dev` of the machine running the tests,
//! checked against what sysfs itself says. Ignored by default (a machine
//! may have no PCI, USB or NUMA sysfs, and a skip must not count as a
//! pass): `cargo nextest run -p wdp-hardware --run-ignored only` runs them
//! where the machine has what they read, and fails where it has not.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use wdp_hardware::{
    CandidateKind, HostRoot, NodeSelector, NodeType, Selector, discover, glob_nodes, numa_nodes,
    read_attribute, scan_pci, scan_usb,
};

fn sysfs_hex(path: &Path) -> u32 {
    let text = std::fs::read_to_string(path).unwrap();
    u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).unwrap()
}

fn attr_hex(c: &wdp_hardware::Candidate, key: &str) -> u32 {
    u32::from_str_radix(c.attribute(key).unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
#[ignore = "reads this machine's real /sys/bus/pci: run with --run-ignored on a machine that has one"]
fn real_pci_matches_sysfs() {
    let bus = Path::new("/sys/bus/pci/devices");
    assert!(bus.exists(), "this machine has no /sys/bus/pci/devices");
    let root = HostRoot::new("/");
    let scan = scan_pci(&root);
    for w in &scan.warnings {
        eprintln!("warning: {w}");
    }
    let mut expected: Vec<String> = std::fs::read_dir(bus)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    expected.sort();
    let got: Vec<&str> = scan.candidates.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(got, expected, "scan lists exactly /sys/bus/pci/devices");
    eprintln!("{} PCI functions on this machine", got.len());
    for c in &scan.candidates {
        let dir = bus.join(&c.id);
        assert_eq!(c.kind, CandidateKind::Pci);
        assert_eq!(
            attr_hex(c, "pci.vendor"),
            sysfs_hex(&dir.join("vendor")),
            "{}",
            c.id
        );
        assert_eq!(
            attr_hex(c, "pci.device"),
            sysfs_hex(&dir.join("device")),
            "{}",
            c.id
        );
        assert_eq!(
            attr_hex(c, "pci.class"),
            sysfs_hex(&dir.join("class")),
            "{}",
            c.id
        );
        let real_dir = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(c.sysfs_dir.as_deref(), Some(real_dir.as_path()), "{}", c.id);
        let driver = std::fs::read_link(dir.join("driver"))
            .ok()
            .map(|t| t.file_name().unwrap().to_string_lossy().into_owned());
        assert_eq!(c.attribute("pci.driver"), driver.as_deref(), "{}", c.id);
        let group = std::fs::read_link(dir.join("iommu_group"))
            .ok()
            .map(|t| t.file_name().unwrap().to_string_lossy().into_owned());
        assert_eq!(c.attribute("pci.iommu-group"), group.as_deref(), "{}", c.id);
        let numa: Option<i64> = std::fs::read_to_string(dir.join("numa_node"))
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let expected_numa: Vec<i64> = numa.filter(|n| *n >= 0).into_iter().collect();
        assert_eq!(c.numa_nodes, expected_numa, "{}", c.id);
        // The scoped reader agrees with a direct read.
        let vendor = read_attribute(&root, c, "vendor").unwrap();
        assert_eq!(
            vendor,
            std::fs::read_to_string(dir.join("vendor"))
                .unwrap()
                .trim_end()
        );
        for node in &c.nodes {
            assert!(node.path.exists(), "{}", node.path.display());
        }
    }
}

#[test]
#[ignore = "reads this machine's real /sys/bus/usb: run with --run-ignored on a machine that has one"]
fn real_usb_matches_sysfs() {
    let bus = Path::new("/sys/bus/usb/devices");
    assert!(bus.exists(), "this machine has no /sys/bus/usb/devices");
    let scan = scan_usb(&HostRoot::new("/"));
    let mut expected: Vec<String> = std::fs::read_dir(bus)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| !n.contains(':'))
        .collect();
    expected.sort();
    let got: Vec<&str> = scan.candidates.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(got, expected);
    for c in &scan.candidates {
        assert_eq!(
            attr_hex(c, "usb.vendor"),
            sysfs_hex(&bus.join(&c.id).join("idVendor")),
            "{}",
            c.id
        );
    }
}

/// Type and numbers of a real node, as the kernel says.
fn stat_node(path: &Path) -> Option<(NodeType, u32, u32)> {
    let meta = std::fs::metadata(path).ok()?;
    let dev = meta.rdev();
    let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0xfff);
    let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0xff);
    let ft = meta.file_type();
    let t = if ft.is_char_device() {
        NodeType::Char
    } else if ft.is_block_device() {
        NodeType::Block
    } else {
        return None;
    };
    Some((t, major as u32, minor as u32))
}

#[test]
fn real_device_nodes_match_sysfs() {
    let root = HostRoot::new("/");
    let null = glob_nodes(&root, "/dev/null").unwrap();
    assert_eq!(null.len(), 1);
    assert_eq!(
        (null[0].node_type, null[0].major, null[0].minor),
        (NodeType::Char, 1, 3)
    );
    assert_eq!(null[0].path, PathBuf::from("/dev/null"));

    // Every well-known node present here: numbers from the node agree with
    // the `dev` file of the sysfs device the /sys/dev/char link leads to.
    for name in [
        "null", "zero", "full", "random", "urandom", "fuse", "kvm", "net/tun", "tty",
    ] {
        let path = Path::new("/dev").join(name);
        let Some((t, major, minor)) = stat_node(&path) else {
            eprintln!("{}: absent here", path.display());
            continue;
        };
        let nodes = glob_nodes(&root, path.to_str().unwrap()).unwrap();
        assert_eq!(
            (nodes[0].node_type, nodes[0].major, nodes[0].minor),
            (t, major, minor),
            "{name}"
        );
        let sysfs = format!("/sys/dev/char/{major}:{minor}/dev");
        if let Ok(dev) = std::fs::read_to_string(&sysfs) {
            assert_eq!(dev.trim(), format!("{major}:{minor}"), "{sysfs}");
        }
        let scan = discover(
            &root,
            &[Selector::Nodes(NodeSelector {
                path: path.to_string_lossy().into_owned(),
                optional: false,
            })],
        )
        .unwrap();
        let c = &scan.candidates[0];
        assert_eq!(c.id, name.replace('/', "-"));
        if Path::new(&format!("/sys/dev/char/{major}:{minor}")).exists() {
            let expected = std::fs::canonicalize(format!("/sys/dev/char/{major}:{minor}")).unwrap();
            assert_eq!(c.sysfs_dir.as_deref(), Some(expected.as_path()), "{name}");
            assert_eq!(
                read_attribute(&root, c, "dev").unwrap(),
                format!("{major}:{minor}")
            );
        }
    }

    // A glob over /dev/: every char/block node agrees with stat. (Through
    // discover, so links to /proc/self/fd/… pipes are warnings, not errors.)
    let all = discover(
        &root,
        &[Selector::Nodes(NodeSelector {
            path: "/dev/*".into(),
            optional: false,
        })],
    )
    .unwrap();
    assert!(!all.candidates.is_empty());
    for c in &all.candidates {
        let n = &c.nodes[0];
        if let Some((t, major, minor)) = stat_node(&n.path) {
            assert_eq!(
                (n.node_type, n.major, n.minor),
                (t, major, minor),
                "{}",
                n.path.display()
            );
        }
    }
}

#[test]
#[ignore = "reads this machine's real /sys/devices/system/node: run with --run-ignored on a machine that has one"]
fn real_numa_matches_sysfs() {
    let dir = Path::new("/sys/devices/system/node");
    assert!(dir.exists(), "this machine has no /sys/devices/system/node");
    let count = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name().into_string().unwrap();
            name.strip_prefix("node")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count();
    let nodes = numa_nodes(&HostRoot::new("/"));
    assert_eq!(nodes.len(), count);
    for n in &nodes {
        let cpus = std::fs::read_to_string(dir.join(format!("node{}/cpulist", n.id))).unwrap();
        assert_eq!(n.cpus, cpus.trim());
    }
}
