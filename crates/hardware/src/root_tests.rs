use super::*;

#[test]
fn resolve_and_back() {
    let root = HostRoot::new("/host");
    assert_eq!(
        root.resolve(Path::new("/dev/fuse")),
        PathBuf::from("/host/dev/fuse")
    );
    assert_eq!(
        root.resolve(Path::new("dev/fuse")),
        PathBuf::from("/host/dev/fuse")
    );
    assert_eq!(root.resolve(Path::new("/")), PathBuf::from("/host"));
    assert_eq!(
        root.resolve(Path::new("/../../etc/./passwd")),
        PathBuf::from("/host/etc/passwd")
    );
    assert_eq!(
        root.to_host_path(Path::new("/host/dev/fuse")),
        Some(PathBuf::from("/dev/fuse"))
    );
    assert_eq!(
        root.to_host_path(Path::new("/host")),
        Some(PathBuf::from("/"))
    );
    assert_eq!(root.to_host_path(Path::new("/hostile/x")), None);
    assert_eq!(root.to_host_path(Path::new("relative")), None);
}

#[test]
fn slash_root_is_identity() {
    let root = HostRoot::default();
    assert!(root.is_slash());
    assert_eq!(
        root.resolve(Path::new("/dev/null")),
        PathBuf::from("/dev/null")
    );
    assert_eq!(
        root.to_host_path(Path::new("/dev/null")),
        Some(PathBuf::from("/dev/null"))
    );
}

#[test]
fn link_targets() {
    assert_eq!(
        link_target_host(
            Path::new("/sys/bus/pci/devices/0000:00:01.0"),
            Path::new("../../../devices/pci0000:00/0000:00:01.0")
        ),
        PathBuf::from("/sys/devices/pci0000:00/0000:00:01.0")
    );
    assert_eq!(
        link_target_host(Path::new("/dev/fd"), Path::new("/proc/self/fd")),
        PathBuf::from("/proc/self/fd")
    );
    assert_eq!(
        link_target_host(Path::new("/a"), Path::new("../../../../x")),
        PathBuf::from("/x")
    );
}

#[test]
fn follow_links_stays_in_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = HostRoot::new(dir.path());
    std::fs::create_dir_all(dir.path().join("dev/real")).unwrap();
    std::fs::write(dir.path().join("dev/real/node"), b"").unwrap();
    std::os::unix::fs::symlink("/dev/real/node", dir.path().join("dev/abs")).unwrap();
    std::os::unix::fs::symlink("real/node", dir.path().join("dev/rel")).unwrap();
    std::os::unix::fs::symlink("loop", dir.path().join("dev/loop")).unwrap();
    assert_eq!(
        root.follow_links(Path::new("/dev/abs")).unwrap(),
        PathBuf::from("/dev/real/node")
    );
    assert_eq!(
        root.follow_links(Path::new("/dev/rel")).unwrap(),
        PathBuf::from("/dev/real/node")
    );
    assert!(root.follow_links(Path::new("/dev/loop")).is_err());
}
