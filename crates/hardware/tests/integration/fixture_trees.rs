//! Discovery against the committed fixture host trees.

use std::path::{Path, PathBuf};

use crate::common::{find, fixture, fixture_root, ids, node_paths};
use wdp_hardware::{
    CandidateKind, DeviceNode, HardwareError, NodeSelector, NodeType, PciSelector, Selector,
    UsbSelector, discover, glob_nodes, numa_nodes, scan_pci, scan_usb,
};

fn pci(f: impl FnOnce(&mut PciSelector)) -> Selector {
    let mut s = PciSelector::default();
    f(&mut s);
    Selector::Pci(s)
}

fn usb(f: impl FnOnce(&mut UsbSelector)) -> Selector {
    let mut s = UsbSelector::default();
    f(&mut s);
    Selector::Usb(s)
}

fn nodes(path: &str, optional: bool) -> Selector {
    Selector::Nodes(NodeSelector {
        path: path.into(),
        optional,
    })
}

const GPUS: [&str; 8] = [
    "0000:03:00.0",
    "0000:04:00.0",
    "0000:07:00.0",
    "0000:08:00.0",
    "0000:83:00.0",
    "0000:84:00.0",
    "0000:87:00.0",
    "0000:88:00.0",
];

fn gpu_selector() -> Selector {
    pci(|s| {
        s.vendor = Some("10de".into());
        s.class = Some("0x0302".into());
    })
}

#[test]
fn gpu_server_full_scan() {
    let root = fixture_root("gpu-server");
    let scan = scan_pci(&root);
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    // Per NUMA node: 2 root ports, 2 switch upstream + 4 downstream ports,
    // 4 GPUs; plus a NIC and its root port, an NVSwitch and its root port.
    assert_eq!(scan.candidates.len(), 28, "{:?}", ids(&scan));
    let mut sorted = ids(&scan);
    sorted.sort_unstable();
    assert_eq!(sorted, ids(&scan), "sorted by address");
}

#[test]
fn gpu_server_gpus() {
    let root = fixture_root("gpu-server");
    let scan = discover(&root, &[gpu_selector()]).unwrap();
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    assert_eq!(ids(&scan), GPUS);
    for (i, c) in scan.candidates.iter().enumerate() {
        let numa = if i < 4 { 0 } else { 1 };
        assert_eq!(c.kind, CandidateKind::Pci);
        assert_eq!(c.numa_nodes, vec![numa], "{}", c.id);
        assert_eq!(
            c.attribute("pci.numa-node"),
            Some(numa.to_string().as_str())
        );
        assert_eq!(c.attribute("pci.vendor"), Some("0x10de"));
        assert_eq!(c.attribute("pci.device"), Some("0x2330"));
        assert_eq!(c.attribute("pci.class"), Some("0x030200"));
        assert_eq!(c.attribute("pci.subsystem-vendor"), Some("0x10de"));
        assert_eq!(c.attribute("pci.subsystem-device"), Some("0x16c1"));
        assert_eq!(c.attribute("pci.driver"), Some("nvidia"));
        assert_eq!(c.attribute("pci.link-speed"), Some("32.0 GT/s PCIe"));
        assert_eq!(c.attribute("pci.link-width"), Some("16"));
        assert_eq!(c.attribute("pci.max-link-width"), Some("16"));
        assert_eq!(
            c.attribute("pci.local-cpus"),
            Some(if numa == 0 {
                "0-31,64-95"
            } else {
                "32-63,96-127"
            })
        );
        assert!(c.attribute("pci.iommu-group").is_some());
        assert_eq!(c.attribute("nvidia.minor"), Some(i.to_string().as_str()));
        assert_eq!(
            c.attribute("nvidia.uuid"),
            Some(format!("GPU-5c4a2f6e-0000-0000-0000-00000000000{i}").as_str())
        );
        assert_eq!(node_paths(c), vec![format!("/dev/nvidia{i}")]);
        // Fixture nodes are plain files and NVIDIA nodes have no sysfs entry.
        assert_eq!(c.nodes[0].node_type, NodeType::Other);
        let path = c.attribute("pci.path").unwrap();
        assert!(path.starts_with("/sys/devices/pci0000:") && path.ends_with(&c.id));
        assert_eq!(c.sysfs_dir.as_deref(), Some(Path::new(path)));
        assert!(c.attribute("pci.physfn").is_none());
    }
    // Link-locality pairs: GPUs behind the same switch share the switch's
    // upstream port two levels up; GPUs of different switches do not.
    let switch = |id: &str| {
        let path = PathBuf::from(find(&scan, id).attribute("pci.path").unwrap());
        path.parent().unwrap().parent().unwrap().to_path_buf()
    };
    let switches = [
        "0000:01:00.0",
        "0000:05:00.0",
        "0000:81:00.0",
        "0000:85:00.0",
    ];
    for (pair, upstream) in GPUS.chunks(2).zip(switches) {
        assert_eq!(switch(pair[0]), switch(pair[1]));
        assert!(
            switch(pair[0]).ends_with(upstream),
            "{}",
            switch(pair[0]).display()
        );
    }
    assert_ne!(switch(GPUS[0]), switch(GPUS[2]));
}

#[test]
fn gpu_server_selectors() {
    let root = fixture_root("gpu-server");
    let count = |sel: Selector| discover(&root, &[sel]).unwrap().candidates.len();
    // Vendor alone also takes the NVSwitch.
    assert_eq!(count(pci(|s| s.vendor = Some("0x10DE".into()))), 9);
    assert_eq!(count(pci(|s| s.class = Some("030200".into()))), 8);
    assert_eq!(count(pci(|s| s.class = Some("0x03".into()))), 8);
    assert_eq!(count(pci(|s| s.class = Some("0x0604".into()))), 18);
    assert_eq!(count(pci(|s| s.driver = Some("nvidia".into()))), 9);
    assert_eq!(count(pci(|s| s.device = Some("2330".into()))), 8);
    assert_eq!(
        count(pci(|s| s.subsystem_device = Some("0x1796".into()))),
        1
    );
    let nic = discover(&root, &[pci(|s| s.driver = Some("igb".into()))]).unwrap();
    assert_eq!(ids(&nic), ["0000:09:00.0"]);
    assert_eq!(nic.candidates[0].attribute("pci.net"), Some("eno1"));
    assert!(nic.candidates[0].nodes.is_empty());
    // Address globs, with and without the domain.
    let by_addr = discover(
        &root,
        &[pci(|s| {
            s.vendor = Some("10de".into());
            s.class = Some("0x0302".into());
            s.address = Some("8[34]:00.0".into());
        })],
    )
    .unwrap();
    assert_eq!(ids(&by_addr), ["0000:83:00.0", "0000:84:00.0"]);
    let by_addr = discover(&root, &[pci(|s| s.address = Some("0000:0[34]:*".into()))]).unwrap();
    assert_eq!(ids(&by_addr), ["0000:03:00.0", "0000:04:00.0"]);
    // Union of selectors, deduplicated, sorted by id; nodes after addresses.
    let both = discover(
        &root,
        &[
            gpu_selector(),
            gpu_selector(),
            pci(|s| s.address = Some("0000:03:00.0".into())),
            nodes("/dev/nvidiactl", false),
            nodes("/dev/nvidia-uvm", false),
        ],
    )
    .unwrap();
    assert_eq!(both.candidates.len(), 10);
    assert_eq!(both.candidates[8].id, "nvidia-uvm");
    assert_eq!(both.candidates[9].id, "nvidiactl");
    assert_eq!(both.candidates[9].kind, CandidateKind::Node);
    assert_eq!(
        both.candidates[9].attribute("node.path"),
        Some("/dev/nvidiactl")
    );
    assert_eq!(both.candidates[9].nodes[0].node_type, NodeType::Other);
}

#[test]
fn gpu_server_nodes_and_numa() {
    let root = fixture_root("gpu-server");
    let scan = discover(&root, &[nodes("/dev/nvidia[0-9]*", false)]).unwrap();
    let expected: Vec<String> = (0..8).map(|i| format!("nvidia{i}")).collect();
    assert_eq!(ids(&scan), expected);
    assert!(scan.candidates.iter().all(|c| c.sysfs_dir.is_none()));
    // A missing literal node is an error naming it, unless optional.
    let err = discover(&root, &[nodes("/dev/nvidia-modeset", false)]).unwrap_err();
    assert!(matches!(err, HardwareError::NodeMissing { .. }));
    assert!(err.to_string().contains("/dev/nvidia-modeset"), "{err}");
    let scan = discover(&root, &[nodes("/dev/nvidia-modeset", true)]).unwrap();
    assert!(scan.candidates.is_empty() && scan.warnings.is_empty());
    // A glob matching nothing is a warning, not an error.
    let scan = discover(&root, &[nodes("/dev/dri/*", false)]).unwrap();
    assert!(scan.candidates.is_empty());
    assert_eq!(scan.warnings.len(), 1);
    assert!(scan.warnings[0].contains("/dev/dri/*"));
    // Bad patterns are errors naming them.
    let err = discover(&root, &[nodes("dev/nvidia0", false)]).unwrap_err();
    assert!(matches!(err, HardwareError::BadPattern { .. }), "{err}");

    let numa = numa_nodes(&root);
    assert_eq!(numa.len(), 2);
    assert_eq!((numa[0].id, numa[0].cpus.as_str()), (0, "0-31,64-95"));
    assert_eq!((numa[1].id, numa[1].cpus.as_str()), (1, "32-63,96-127"));
    assert_eq!(numa[1].cpu_ids().len(), 64);
}

#[test]
fn sriov_nic() {
    let root = fixture_root("sriov-nic");
    let all = discover(&root, &[pci(|s| s.vendor = Some("15b3".into()))]).unwrap();
    assert!(all.warnings.is_empty(), "{:?}", all.warnings);
    assert_eq!(
        ids(&all),
        [
            "0000:3b:00.0",
            "0000:3b:00.1",
            "0000:3b:00.2",
            "0000:3b:00.3",
            "0000:3b:00.4",
            "0000:3b:00.5"
        ]
    );
    let pf = find(&all, "0000:3b:00.0");
    assert_eq!(pf.attribute("pci.sriov-totalvfs"), Some("8"));
    assert_eq!(pf.attribute("pci.sriov-numvfs"), Some("4"));
    assert_eq!(
        pf.attribute("pci.virtfns"),
        Some("0000:3b:00.2,0000:3b:00.3,0000:3b:00.4,0000:3b:00.5")
    );
    assert_eq!(pf.attribute("pci.net"), Some("ens1f0np0"));
    assert_eq!(pf.attribute("pci.link-speed"), Some("16.0 GT/s PCIe"));
    assert_eq!(
        pf.nodes,
        vec![DeviceNode {
            path: "/dev/infiniband/uverbs0".into(),
            node_type: NodeType::Char,
            major: 231,
            minor: 192
        }]
    );
    let pf1 = find(&all, "0000:3b:00.1");
    assert_eq!(pf1.attribute("pci.sriov-numvfs"), Some("0"));
    assert!(pf1.attribute("pci.virtfns").is_none());

    // VFs alone: physfn and VF index known without selecting the PF.
    let vfs = discover(&root, &[pci(|s| s.device = Some("0x101e".into()))]).unwrap();
    assert_eq!(vfs.candidates.len(), 4);
    for (i, vf) in vfs.candidates.iter().enumerate() {
        assert_eq!(vf.attribute("pci.physfn"), Some("0000:3b:00.0"));
        assert_eq!(vf.attribute("pci.vf-index"), Some(i.to_string().as_str()));
        assert_eq!(
            vf.attribute("pci.iommu-group"),
            Some((41 + i).to_string().as_str())
        );
        assert_eq!(vf.numa_nodes, vec![0]);
    }
    assert_eq!(node_paths(&vfs.candidates[0]), ["/dev/infiniband/uverbs1"]);
    assert_eq!(vfs.candidates[0].attribute("pci.net"), Some("ens1f0v0"));

    // Bound to vfio-pci: exactly the two VFs, each with its group node.
    let vfio = discover(&root, &[pci(|s| s.driver = Some("vfio-pci".into()))]).unwrap();
    assert_eq!(ids(&vfio), ["0000:3b:00.4", "0000:3b:00.5"]);
    for (c, (group, minor)) in vfio.candidates.iter().zip([(43, 0), (44, 1)]) {
        assert_eq!(
            c.nodes,
            vec![DeviceNode {
                path: format!("/dev/vfio/{group}").into(),
                node_type: NodeType::Char,
                major: 511,
                minor
            }]
        );
        assert!(c.attribute("pci.net").is_none());
    }
    // The shared container node, through a node selector, with its sysfs dir.
    let container = discover(&root, &[nodes("/dev/vfio/vfio", false)]).unwrap();
    let c = &container.candidates[0];
    assert_eq!(c.id, "vfio-vfio");
    assert_eq!(
        (c.nodes[0].node_type, c.nodes[0].major, c.nodes[0].minor),
        (NodeType::Char, 10, 196)
    );
    assert_eq!(
        c.sysfs_dir.as_deref(),
        Some(Path::new("/sys/devices/virtual/misc/vfio"))
    );
}

#[test]
fn usb_devices() {
    let root = fixture_root("usb");
    let scan = scan_usb(&root);
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    // Interfaces (1-1:1.0, 1-0:1.0 …) are not devices.
    assert_eq!(ids(&scan), ["1-1", "1-1.2", "2-1", "usb1", "usb2"]);
    assert!(scan.candidates.iter().all(|c| c.kind == CandidateKind::Usb));

    let ftdi = discover(&root, &[usb(|s| s.vendor = Some("0403".into()))]).unwrap();
    assert_eq!(ids(&ftdi), ["1-1.2"]);
    let c = &ftdi.candidates[0];
    assert_eq!(c.attribute("usb.vendor"), Some("0x0403"));
    assert_eq!(c.attribute("usb.product"), Some("0x6001"));
    assert_eq!(c.attribute("usb.serial"), Some("A50285BI"));
    assert_eq!(c.attribute("usb.busnum"), Some("1"));
    assert_eq!(c.attribute("usb.devnum"), Some("3"));
    assert_eq!(c.attribute("usb.manufacturer"), Some("FTDI"));
    assert_eq!(c.attribute("usb.product-name"), Some("FT232R USB UART"));
    assert_eq!(c.attribute("usb.speed"), Some("12"));
    assert_eq!(c.attribute("usb.device-class"), Some("0x00"));
    assert_eq!(c.numa_nodes, vec![0], "from the xHCI controller");
    assert_eq!(
        c.nodes,
        vec![DeviceNode {
            path: "/dev/bus/usb/001/003".into(),
            node_type: NodeType::Char,
            major: 189,
            minor: 2
        }]
    );
    assert_eq!(
        c.sysfs_dir.as_deref(),
        Some(Path::new(
            "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2"
        ))
    );

    let coral = discover(
        &root,
        &[usb(|s| {
            s.vendor = Some("1A6E".into());
            s.product = Some("0x089a".into());
        })],
    )
    .unwrap();
    assert_eq!(ids(&coral), ["2-1"]);
    assert!(coral.candidates[0].attribute("usb.serial").is_none());
    assert_eq!(node_paths(&coral.candidates[0]), ["/dev/bus/usb/002/002"]);
    assert_eq!(coral.candidates[0].nodes[0].minor, 129);

    let by_serial = discover(&root, &[usb(|s| s.serial = Some("A50285BI".into()))]).unwrap();
    assert_eq!(ids(&by_serial), ["1-1.2"]);
    let none = discover(
        &root,
        &[usb(|s| {
            s.vendor = Some("0403".into());
            s.product = Some("6010".into());
        })],
    )
    .unwrap();
    assert!(none.candidates.is_empty());
    let hubs = discover(&root, &[usb(|s| s.vendor = Some("1d6b".into()))]).unwrap();
    assert_eq!(ids(&hubs), ["usb1", "usb2"]);
}

#[test]
fn fpga_card() {
    let root = fixture_root("fpga");
    let scan = discover(&root, &[pci(|s| s.class = Some("0x1200".into()))]).unwrap();
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    assert_eq!(ids(&scan), ["0000:65:00.0", "0000:65:00.1"]);
    let mgmt = find(&scan, "0000:65:00.0");
    assert_eq!(mgmt.attribute("pci.driver"), Some("xclmgmt"));
    assert!(mgmt.nodes.is_empty());
    let user = find(&scan, "0000:65:00.1");
    assert_eq!(user.attribute("pci.vendor"), Some("0x10ee"));
    assert_eq!(user.attribute("pci.device"), Some("0x5005"));
    assert_eq!(
        user.nodes,
        vec![
            DeviceNode {
                path: "/dev/dri/card0".into(),
                node_type: NodeType::Char,
                major: 226,
                minor: 0
            },
            DeviceNode {
                path: "/dev/dri/renderD128".into(),
                node_type: NodeType::Char,
                major: 226,
                minor: 128
            },
        ]
    );
    // The same numbers by glob, from the /sys/dev/char links.
    let globbed = glob_nodes(&root, "/dev/dri/*").unwrap();
    assert_eq!(globbed, user.nodes);
    // A node selector finds the node's sysfs dir and its NUMA node.
    let render = discover(&root, &[nodes("/dev/dri/renderD*", false)]).unwrap();
    let c = &render.candidates[0];
    assert_eq!(c.id, "dri-renderD128");
    assert_eq!(
        c.sysfs_dir.as_deref(),
        Some(Path::new(
            "/sys/devices/pci0000:64/0000:64:00.0/0000:65:00.1/drm/renderD128"
        ))
    );
    assert_eq!(c.numa_nodes, vec![0]);
    assert_eq!(c.attribute("node.path"), Some("/dev/dri/renderD128"));
    assert_eq!((c.nodes[0].major, c.nodes[0].minor), (226, 128));
}

#[test]
fn reported_paths_are_host_paths() {
    for name in ["gpu-server", "sriov-nic", "usb", "fpga"] {
        let root = fixture_root(name);
        let selectors = [
            Selector::Pci(PciSelector::default()),
            Selector::Usb(UsbSelector::default()),
            nodes("/dev/*", true),
            nodes("/dev/*/*", true),
            nodes("/dev/*/*/*/*", true),
        ];
        let scan = discover(&root, &selectors).unwrap();
        assert!(!scan.candidates.is_empty(), "{name}");
        let json = serde_json::to_string(&scan).unwrap();
        let prefix = fixture(name).to_string_lossy().into_owned();
        let base = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(
            !json.contains(&prefix) && !json.contains(&base),
            "{name}: {json}"
        );
        for c in &scan.candidates {
            for n in &c.nodes {
                assert!(n.path.starts_with("/dev/"), "{}", n.path.display());
                assert!(root.resolve(&n.path).exists(), "{}", n.path.display());
            }
            if let Some(dir) = &c.sysfs_dir {
                assert!(dir.starts_with("/sys/"), "{}", dir.display());
                assert!(root.resolve(dir).is_dir(), "{}", dir.display());
            }
        }
    }
}
