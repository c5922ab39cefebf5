//! Scoped attribute access: reads only beneath the device, writes only where
//! granted, path tricks refused.

use std::path::{Path, PathBuf};

use crate::common::{find, fixture_copy};
use wdp_hardware::{
    AccessError, Candidate, HostRoot, PciSelector, Selector, discover, list_attributes,
    read_attribute, read_attribute_bytes, write_attribute,
};

const PF: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
const VF2: &str = "sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.4";

struct Setup {
    dir: tempfile::TempDir,
    root: HostRoot,
    pf: Candidate,
    vf: Candidate,
    /// A file outside the root that no access may reach.
    secret: PathBuf,
    _outside: tempfile::TempDir,
}

fn setup() -> Setup {
    let (dir, root) = fixture_copy("sriov-nic");
    let scan = discover(
        &root,
        &[Selector::Pci(PciSelector {
            vendor: Some("15b3".into()),
            ..Default::default()
        })],
    )
    .unwrap();
    let pf = find(&scan, "0000:3b:00.0").clone();
    let vf = find(&scan, "0000:3b:00.4").clone();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "top secret\n").unwrap();
    Setup {
        dir,
        root,
        pf,
        vf,
        secret,
        _outside: outside,
    }
}

fn granted(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn reads_beneath_the_device() {
    let s = setup();
    assert_eq!(read_attribute(&s.root, &s.vf, "vendor").unwrap(), "0x15b3");
    assert_eq!(read_attribute(&s.root, &s.pf, "sriov_numvfs").unwrap(), "4");
    assert_eq!(
        read_attribute(&s.root, &s.pf, "./current_link_width").unwrap(),
        "16"
    );
    assert_eq!(
        read_attribute(&s.root, &s.pf, "infiniband_verbs/uverbs0/dev").unwrap(),
        "231:192"
    );
    assert_eq!(
        read_attribute_bytes(&s.root, &s.vf, "class").unwrap(),
        b"0x020000\n"
    );
    // A symlink that stays inside the device directory is fine.
    std::os::unix::fs::symlink("vendor", s.dir.path().join(VF2).join("alias")).unwrap();
    assert_eq!(read_attribute(&s.root, &s.vf, "alias").unwrap(), "0x15b3");
    let names = list_attributes(&s.root, &s.pf, "").unwrap();
    assert!(names.contains(&"vendor".to_string()) && names.contains(&"virtfn0".to_string()));
    assert_eq!(
        list_attributes(&s.root, &s.pf, "net").unwrap(),
        ["ens1f0np0"]
    );
}

fn assert_refused(err: AccessError, candidate: &str, name: &str) {
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            AccessError::BadName { .. } | AccessError::OutsideDevice { .. }
        ),
        "{msg}"
    );
    assert!(msg.contains(candidate) && msg.contains(name), "{msg}");
}

#[test]
fn path_tricks_are_refused() {
    let s = setup();
    let vf_dir = s.dir.path().join(VF2);
    // `..` in any position, even when it would land inside.
    for name in [
        "../0000:3b:00.0/sriov_numvfs",
        "net/../vendor",
        "..",
        "a/../../x",
    ] {
        assert_refused(
            read_attribute(&s.root, &s.vf, name).unwrap_err(),
            "0000:3b:00.4",
            name,
        );
    }
    // Absolute names.
    let secret = s.secret.to_str().unwrap();
    for name in ["/etc/passwd", secret] {
        assert_refused(
            read_attribute(&s.root, &s.vf, name).unwrap_err(),
            "0000:3b:00.4",
            name,
        );
    }
    // The kernel's own links out of the device directory.
    for name in [
        "driver/bind",
        "iommu_group/devices",
        "physfn/sriov_numvfs",
        "physfn",
    ] {
        assert_refused(
            read_attribute(&s.root, &s.vf, name).unwrap_err(),
            "0000:3b:00.4",
            name,
        );
    }
    // Planted symlinks: absolute out of the root, relative out of the tree,
    // a directory link out of the device, and a chain.
    std::os::unix::fs::symlink(&s.secret, vf_dir.join("evil-abs")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../../../../../../../etc/passwd",
        vf_dir.join("evil-rel"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../0000:3b:00.0", vf_dir.join("evil-dir")).unwrap();
    std::os::unix::fs::symlink("evil-abs", vf_dir.join("evil-chain")).unwrap();
    for name in [
        "evil-abs",
        "evil-rel",
        "evil-dir/sriov_numvfs",
        "evil-chain",
    ] {
        assert_refused(
            read_attribute(&s.root, &s.vf, name).unwrap_err(),
            "0000:3b:00.4",
            name,
        );
        assert_refused(
            write_attribute(&s.root, &s.vf, name, "x", &granted(&[name])).unwrap_err(),
            "0000:3b:00.4",
            name,
        );
    }
    assert_eq!(std::fs::read_to_string(&s.secret).unwrap(), "top secret\n");
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join(PF).join("sriov_numvfs")).unwrap(),
        "4\n"
    );
    assert!(matches!(
        list_attributes(&s.root, &s.vf, "evil-dir").unwrap_err(),
        AccessError::OutsideDevice { .. }
    ));
    assert!(matches!(
        list_attributes(&s.root, &s.vf, "../").unwrap_err(),
        AccessError::BadName { .. }
    ));
}

#[test]
fn a_device_dir_outside_the_root_is_refused() {
    let s = setup();
    std::os::unix::fs::symlink(
        s.secret.parent().unwrap(),
        s.dir.path().join("sys/devices/escape"),
    )
    .unwrap();
    let mut forged = s.vf.clone();
    forged.sysfs_dir = Some(PathBuf::from("/sys/devices/escape"));
    assert!(matches!(
        read_attribute(&s.root, &forged, "secret").unwrap_err(),
        AccessError::OutsideDevice { .. }
    ));
    let mut none = s.vf.clone();
    none.sysfs_dir = None;
    let err = read_attribute(&s.root, &none, "vendor").unwrap_err();
    assert!(matches!(err, AccessError::NoSysfsDir { .. }), "{err}");
}

#[test]
fn odd_files() {
    let s = setup();
    let vf_dir = s.dir.path().join(VF2);
    let err = read_attribute(&s.root, &s.vf, "no_such_attr").unwrap_err();
    assert!(matches!(err, AccessError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("no_such_attr") && err.to_string().contains("0000:3b:00.4"));
    let err = read_attribute(&s.root, &s.pf, "net").unwrap_err();
    assert!(matches!(err, AccessError::NotAFile { .. }), "{err}");
    // A FIFO is refused without blocking.
    let status = std::process::Command::new("mkfifo")
        .arg(vf_dir.join("fifo"))
        .status();
    if status.is_ok_and(|s| s.success()) {
        let err = read_attribute(&s.root, &s.vf, "fifo").unwrap_err();
        assert!(matches!(err, AccessError::NotAFile { .. }), "{err}");
        let err = write_attribute(&s.root, &s.vf, "fifo", "1", &granted(&["fifo"])).unwrap_err();
        assert!(matches!(err, AccessError::NotAFile { .. }), "{err}");
    } else {
        eprintln!("mkfifo unavailable: FIFO case not exercised");
    }
    // Over the size limit.
    std::fs::write(vf_dir.join("big"), vec![b'x'; 64 * 1024 + 1]).unwrap();
    let err = read_attribute(&s.root, &s.vf, "big").unwrap_err();
    assert!(matches!(err, AccessError::TooLarge { .. }), "{err}");
    std::fs::write(vf_dir.join("binary"), [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        read_attribute(&s.root, &s.vf, "binary").unwrap_err(),
        AccessError::NotText { .. }
    ));
    assert_eq!(
        read_attribute_bytes(&s.root, &s.vf, "binary").unwrap(),
        [0xff, 0xfe, 0x00]
    );
}

#[test]
fn writes_only_where_granted() {
    let s = setup();
    let numvfs = s.dir.path().join(PF).join("sriov_numvfs");
    let grant = granted(&["sriov_numvfs", "reset"]);
    // Not granted: refused before anything is touched, naming device and name.
    let err = write_attribute(&s.root, &s.pf, "sriov_totalvfs", "16", &grant).unwrap_err();
    assert!(matches!(err, AccessError::NotGranted { .. }), "{err}");
    assert!(err.to_string().contains("0000:3b:00.0") && err.to_string().contains("sriov_totalvfs"));
    assert_eq!(
        std::fs::read_to_string(s.dir.path().join(PF).join("sriov_totalvfs")).unwrap(),
        "8\n"
    );
    let err = write_attribute(&s.root, &s.pf, "sriov_numvfs", "2", &[]).unwrap_err();
    assert!(matches!(err, AccessError::NotGranted { .. }), "{err}");
    // Granted.
    write_attribute(&s.root, &s.pf, "sriov_numvfs", "2", &grant).unwrap();
    assert_eq!(std::fs::read_to_string(&numvfs).unwrap(), "2");
    assert_eq!(read_attribute(&s.root, &s.pf, "sriov_numvfs").unwrap(), "2");
    write_attribute(&s.root, &s.pf, "./sriov_numvfs", "0\n", &grant).unwrap();
    assert_eq!(std::fs::read_to_string(&numvfs).unwrap(), "0\n");
    // Granted but absent: nothing is created.
    let err = write_attribute(&s.root, &s.pf, "reset", "1", &grant).unwrap_err();
    assert!(matches!(err, AccessError::NotFound { .. }), "{err}");
    assert!(!Path::new(&s.dir.path().join(PF).join("reset")).exists());
    // A grant does not widen the scope: another device's attribute of the
    // same name is still reached only through that device.
    let err = write_attribute(
        &s.root,
        &s.vf,
        "../0000:3b:00.0/sriov_numvfs",
        "4",
        &granted(&["../0000:3b:00.0/sriov_numvfs"]),
    )
    .unwrap_err();
    assert!(matches!(err, AccessError::BadName { .. }), "{err}");
    let err = write_attribute(
        &s.root,
        &s.pf,
        "sriov_numvfs",
        &"9".repeat(64 * 1024 + 1),
        &grant,
    )
    .unwrap_err();
    assert!(matches!(err, AccessError::TooLarge { .. }), "{err}");
}
