use super::*;

#[test]
fn reads_and_device_writes_are_not_changes() {
    use wdp_fs_watch::event::{AccessKind, CreateKind, DataChange, RemoveKind};
    let event = |kind, path: &str| wdp_fs_watch::Event::new(kind).add_path(PathBuf::from(path));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("attr");
    std::fs::write(&file, b"1").unwrap();
    let file = file.to_str().unwrap();
    assert!(!relevant(&event(EventKind::Access(AccessKind::Any), file)));
    assert!(!relevant(&event(
        EventKind::Modify(ModifyKind::Metadata(MetadataKind::AccessTime)),
        file
    )));
    assert!(relevant(&event(
        EventKind::Modify(ModifyKind::Data(DataChange::Any)),
        file
    )));
    assert!(relevant(&event(EventKind::Create(CreateKind::File), file)));
    assert!(relevant(&event(
        EventKind::Remove(RemoveKind::Any),
        "/gone"
    )));
    if Path::new("/dev/null").exists() {
        assert!(!relevant(&event(
            EventKind::Modify(ModifyKind::Data(DataChange::Any)),
            "/dev/null"
        )));
    }
}

#[test]
fn pattern_dirs() {
    assert_eq!(pattern_dir("/dev/dri/renderD*"), PathBuf::from("/dev/dri"));
    assert_eq!(pattern_dir("/dev/fuse"), PathBuf::from("/dev"));
    assert_eq!(pattern_dir("/dev/*/x"), PathBuf::from("/dev"));
    assert_eq!(pattern_dir("/dev/net/tun"), PathBuf::from("/dev/net"));
}
