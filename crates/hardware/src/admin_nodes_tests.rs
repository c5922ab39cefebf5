use super::*;

const PROC_DEVICES: &str = "Character devices:\n  1 mem\n195 nvidia\n202 cpu/msr\n234 nvidia-nvswitch\n235 nvidia-caps\n237 mei\n\nBlock devices:\n  7 loop\n";

fn host(caps: &[(&str, u32)]) -> (tempfile::TempDir, HostRoot) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("proc/devices"), PROC_DEVICES).unwrap();
    for (cap, minor) in caps {
        let file = dir
            .path()
            .join(format!("proc/driver/nvidia/capabilities/{cap}"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            file,
            format!("DeviceFileMinor: {minor}\nDeviceFileMode: 256\nDeviceFileModify: 1\n"),
        )
        .unwrap();
    }
    let root = HostRoot::new(dir.path());
    (dir, root)
}

fn char_node(path: &str, major: u32, minor: u32) -> DeviceNode {
    DeviceNode {
        path: path.into(),
        node_type: NodeType::Char,
        major,
        minor,
    }
}

#[test]
fn proc_devices_lists_character_majors_only() {
    let majors = parse_proc_devices(PROC_DEVICES);
    assert_eq!(majors.get(&235).map(String::as_str), Some("nvidia-caps"));
    assert_eq!(majors.get(&202).map(String::as_str), Some("cpu/msr"));
    assert!(!majors.contains_key(&7), "a block major: {majors:?}");
}

#[test]
fn nvidia_capabilities_are_judged_by_the_minor_the_driver_gives() {
    // Minors as a driver might number them: config 7, monitor 8.
    let (_dir, root) = host(&[("mig/config", 7), ("mig/monitor", 8)]);
    let known = AdminNodes::read(&root);
    // Under any name, the numbers decide.
    let config = known.judge(&char_node("/dev/renamed", 235, 7)).unwrap();
    assert_eq!(config.kind, AdminNodeKind::NvidiaMigConfig);
    assert!(
        config
            .evidence
            .contains("/proc/driver/nvidia/capabilities/mig/config"),
        "{}",
        config.evidence
    );
    assert_eq!(
        known.judge(&char_node("/dev/x", 235, 8)).unwrap().kind,
        AdminNodeKind::NvidiaMigMonitor
    );
    // A per-instance capability (any other minor) is not administrative,
    // even at the name minor 1 would have without the driver's files.
    assert_eq!(
        known.judge(&char_node("/dev/nvidia-caps/nvidia-cap1", 235, 1)),
        None
    );
    // A stand-in without numbers: the name carries the minor.
    let stand_in = DeviceNode {
        path: "/dev/nvidia-caps/nvidia-cap8".into(),
        node_type: NodeType::Other,
        major: 0,
        minor: 0,
    };
    assert_eq!(
        known.judge(&stand_in).unwrap().kind,
        AdminNodeKind::NvidiaMigMonitor
    );
}

#[test]
fn without_the_drivers_files_caps_1_and_2_are_mig_config_and_monitor() {
    let known = AdminNodes::default();
    let kind = |path: &str| {
        known
            .judge(&DeviceNode {
                path: path.into(),
                node_type: NodeType::Other,
                major: 0,
                minor: 0,
            })
            .map(|n| n.kind)
    };
    assert_eq!(
        kind("/dev/nvidia-caps/nvidia-cap1"),
        Some(AdminNodeKind::NvidiaMigConfig)
    );
    assert_eq!(
        kind("/dev/nvidia-caps/nvidia-cap2"),
        Some(AdminNodeKind::NvidiaMigMonitor)
    );
    assert_eq!(
        kind("/dev/nvidia-caps/nvidia-cap0"),
        Some(AdminNodeKind::NvidiaFabricManagement)
    );
    assert_eq!(
        kind("/dev/nvidia-caps/nvidia-cap4323"),
        Some(AdminNodeKind::NvidiaFabricImexManagement)
    );
    assert_eq!(kind("/dev/nvidia-caps/nvidia-cap21"), None);
    assert_eq!(
        kind("/dev/nvidia-nvswitchctl"),
        Some(AdminNodeKind::NvidiaNvswitchControl)
    );
    assert_eq!(kind("/dev/cpu/3/msr"), Some(AdminNodeKind::CpuMsr));
    assert_eq!(kind("/dev/mei0"), Some(AdminNodeKind::IntelMei));
    assert_eq!(
        kind("/dev/nvidia-nvlink"),
        Some(AdminNodeKind::NvidiaNvlinkControl)
    );
    assert_eq!(kind("/dev/mem"), Some(AdminNodeKind::KernelMemory));
    for ordinary in [
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-nvswitch0",
        "/dev/accel/accel0",
        "/dev/accel/accel_controlD0",
        "/dev/memory",
        "/dev/cpu/3/cpuid",
    ] {
        assert_eq!(kind(ordinary), None, "{ordinary}");
    }
}

#[test]
fn numbers_decide_under_any_name() {
    let (_dir, root) = host(&[]);
    let known = AdminNodes::read(&root);
    let kind = |n| known.judge(&n).map(|a| a.kind);
    assert_eq!(
        kind(char_node("/dev/x", 1, 1)),
        Some(AdminNodeKind::KernelMemory)
    );
    assert_eq!(kind(char_node("/dev/null", 1, 3)), None);
    assert_eq!(
        kind(char_node("/dev/y", 234, 255)),
        Some(AdminNodeKind::NvidiaNvswitchControl)
    );
    assert_eq!(kind(char_node("/dev/nvidia-nvswitch0", 234, 0)), None);
    assert_eq!(
        kind(char_node("/dev/z", 202, 0)),
        Some(AdminNodeKind::CpuMsr)
    );
}

#[test]
fn a_symlink_to_an_admin_node_is_admin() {
    let (dir, root) = host(&[("mig/config", 1)]);
    std::fs::create_dir_all(dir.path().join("dev/nvidia-caps")).unwrap();
    std::fs::write(dir.path().join("dev/nvidia-caps/nvidia-cap1"), "").unwrap();
    std::os::unix::fs::symlink(
        "/dev/nvidia-caps/nvidia-cap1",
        dir.path().join("dev/innocent"),
    )
    .unwrap();
    let known = AdminNodes::read(&root);
    let found = known.classify(&root, Path::new("/dev/innocent")).unwrap();
    assert_eq!(found.kind, AdminNodeKind::NvidiaMigConfig);
    assert_eq!(found.path, Path::new("/dev/innocent"));
    // A path that does not exist is judged by its name.
    assert_eq!(
        known
            .classify(&root, Path::new("/dev/nvidia-caps/nvidia-cap1"))
            .map(|n| n.kind),
        Some(AdminNodeKind::NvidiaMigConfig)
    );
    assert_eq!(known.classify(&root, Path::new("/dev/nothing")), None);
}

#[test]
fn every_kind_has_a_unique_name_that_reads_back() {
    for kind in AdminNodeKind::ALL {
        assert_eq!(AdminNodeKind::from_name(kind.name()), Some(kind));
    }
    assert_eq!(AdminNodeKind::from_name("nvidia-cap1"), None);
}
