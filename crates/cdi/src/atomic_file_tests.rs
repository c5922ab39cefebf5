use super::*;

#[test]
fn the_file_is_replaced_whole_either_way_and_no_temporary_file_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("record.json");
    replace(&path, b"first", Durability::Synced).unwrap();
    replace(&path, b"second", Durability::Unsynced).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn a_folder_in_the_way_fails_and_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("record.json");
    std::fs::create_dir_all(path.join("in-the-way")).unwrap();
    assert!(replace(&path, b"x", Durability::Synced).is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
