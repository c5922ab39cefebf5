use super::*;

#[test]
fn devnum_split() {
    // makedev(226, 128) and a large one, makedev(511, 1048575).
    let small = (226u64 << 8) | 128;
    assert_eq!((dev_major(small), dev_minor(small)), (226, 128));
    let (ma, mi) = (511u64, 1_048_575u64);
    let big = ((ma & 0xfff) << 8) | ((ma & !0xfff) << 32) | (mi & 0xff) | ((mi & !0xff) << 12);
    assert_eq!((dev_major(big), dev_minor(big)), (511, 1_048_575));
    assert_eq!(parse_devnum("226:128\n"), Some((226, 128)));
    assert_eq!(parse_devnum("226"), None);
    assert_eq!(parse_devnum("a:b"), None);
}

#[test]
fn patterns_checked() {
    assert!(matches!(
        check_pattern("dev/fuse"),
        Err(HardwareError::BadPattern { .. })
    ));
    let err = check_pattern("/dev/[abc").unwrap_err();
    assert!(err.to_string().contains("/dev/[abc"), "{err}");
    assert!(check_pattern("/dev/dri/renderD*").is_ok());
}

#[test]
fn fixture_style_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let root = HostRoot::new(dir.path());
    let p = dir.path();
    std::fs::create_dir_all(p.join("dev/dri")).unwrap();
    std::fs::create_dir_all(p.join("sys/dev/char")).unwrap();
    std::fs::create_dir_all(p.join("sys/devices/virtual/misc/fuse")).unwrap();
    std::fs::write(
        p.join("sys/devices/virtual/misc/fuse/uevent"),
        "MAJOR=10\nMINOR=229\nDEVNAME=fuse\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        "../../devices/virtual/misc/fuse",
        p.join("sys/dev/char/10:229"),
    )
    .unwrap();
    std::fs::write(p.join("dev/fuse"), b"").unwrap();
    std::fs::write(p.join("dev/plain"), b"").unwrap();
    std::os::unix::fs::symlink("/dev/fuse", p.join("dev/fuse-link")).unwrap();
    std::os::unix::fs::symlink("nowhere", p.join("dev/dangling")).unwrap();

    let fuse = glob_nodes(&root, "/dev/fuse").unwrap();
    assert_eq!(
        fuse,
        vec![DeviceNode {
            path: "/dev/fuse".into(),
            node_type: NodeType::Char,
            major: 10,
            minor: 229
        }]
    );
    let plain = glob_nodes(&root, "/dev/plain").unwrap();
    assert_eq!((plain[0].node_type, plain[0].major), (NodeType::Other, 0));
    let link = glob_nodes(&root, "/dev/fuse-link").unwrap();
    assert_eq!(link[0].path, PathBuf::from("/dev/fuse-link"));
    assert_eq!((link[0].major, link[0].minor), (10, 229));
    assert!(glob_nodes(&root, "/dev/missing").unwrap().is_empty());
    // Directories do not match; a dangling link is skipped here, and a
    // warning naming it in discovery.
    let (_, issues) = glob_resolved(&mut NodeResolver::new(&root), "/dev/*").unwrap();
    assert_eq!(issues.len(), 1);
    assert_eq!(issues[0].0, PathBuf::from("/dev/dangling"));
    let all: Vec<_> = glob_nodes(&root, "/dev/*")
        .unwrap()
        .into_iter()
        .map(|n| n.path)
        .collect();
    assert_eq!(
        all,
        vec![
            PathBuf::from("/dev/fuse"),
            "/dev/fuse-link".into(),
            "/dev/plain".into()
        ]
    );
}

#[test]
fn a_listed_device_node_has_its_own_numbers() {
    // This machine's own /dev: every Linux system has these two.
    let root = HostRoot::new(Path::new("/"));
    let found = glob_nodes(&root, "/dev/[nz][ue][lr]?").unwrap();
    let numbers: Vec<(&Path, NodeType, u32, u32)> = found
        .iter()
        .map(|n| (n.path.as_path(), n.node_type, n.major, n.minor))
        .collect();
    assert_eq!(
        numbers,
        [
            (Path::new("/dev/null"), NodeType::Char, 1, 3),
            (Path::new("/dev/zero"), NodeType::Char, 1, 5),
        ]
    );
}
