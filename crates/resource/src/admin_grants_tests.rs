use super::*;

fn check(
    root: &HostRoot,
    grants: &Grants,
    devices: &[&str],
    mounts: &[&str],
) -> Result<(), String> {
    let screened = HashSet::from(["/dev/nvidia0".to_owned()]);
    check_answer(
        root,
        grants,
        &screened,
        devices.iter().copied(),
        mounts.iter().copied(),
    )
}

#[test]
fn an_answer_granting_mig_config_is_refused_unless_granted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dev/nvidia-caps")).unwrap();
    std::fs::write(dir.path().join("dev/nvidia-caps/nvidia-cap1"), "").unwrap();
    std::fs::write(dir.path().join("dev/nvidia0"), "").unwrap();
    let root = HostRoot::new(dir.path());
    let none = Grants::new();

    check(&root, &none, &["/dev/nvidia0"], &[]).unwrap();
    let error = check(
        &root,
        &none,
        &["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap1"],
        &[],
    )
    .unwrap_err();
    assert!(error.contains("/dev/nvidia-caps/nvidia-cap1"), "{error}");
    assert!(error.contains("nvidia-mig-config"), "{error}");
    assert!(error.contains("grant-admin-nodes"), "{error}");

    // A mount of the directory holding it is refused the same way.
    let error = check(&root, &none, &[], &["/dev/nvidia-caps"]).unwrap_err();
    assert!(error.contains("mount of /dev/nvidia-caps"), "{error}");

    let granted = Grants::from([AdminNodeKind::NvidiaMigConfig]);
    check(
        &root,
        &granted,
        &["/dev/nvidia-caps/nvidia-cap1"],
        &["/dev/nvidia-caps"],
    )
    .unwrap();
}
