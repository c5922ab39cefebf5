use super::*;

fn names(listing: &[Listed]) -> Vec<&str> {
    listing.iter().map(|l| l.name.as_str()).collect()
}

fn acc(name: &str) -> bool {
    name.starts_with("acc")
}

fn touch(dir: &Path, name: &str) {
    std::fs::write(dir.join(name), b"").unwrap();
}

#[test]
fn an_untrusted_directory_is_read_every_time() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), "acc0");
    let cache = ListingCache::default();
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0"]
    );
    touch(dir.path(), "acc1");
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0", "acc1"]
    );
    assert_eq!(cache.kept_count(), 0);
}

#[test]
fn a_trusted_directory_is_read_again_only_after_a_change_under_it() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), "acc0");
    touch(dir.path(), "other");
    let cache = ListingCache::default();
    cache.trust(dir.path(), DirIdentity::of(dir.path()).unwrap());
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0"]
    );
    assert_eq!(cache.kept_count(), 1);
    // No event was reported (no watch in this test): the kept listing.
    touch(dir.path(), "acc1");
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0"]
    );
    // Another pattern, or the same without numbers, is its own listing.
    assert_eq!(
        names(&cache.read(dir.path(), "*", &|_| true, false).unwrap()),
        ["acc0", "acc1", "other"]
    );
    // An event naming an entry drops the listings of its directory.
    cache.changed(&dir.path().join("acc1"), false);
    assert_eq!(cache.kept_count(), 0);
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0", "acc1"]
    );
    // One naming the directory itself too.
    touch(dir.path(), "acc2");
    cache.changed(dir.path(), false);
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0", "acc1", "acc2"]
    );
    // An event under another directory leaves it kept.
    touch(dir.path(), "acc3");
    cache.changed(Path::new("/elsewhere/acc3"), false);
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc0", "acc1", "acc2"]
    );
    // One naming no path drops everything.
    cache.changed_all();
    assert_eq!(cache.read(dir.path(), "acc*", &acc, true).unwrap().len(), 4);
}

#[test]
fn a_directory_no_longer_watched_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    touch(dir.path(), "acc0");
    let cache = ListingCache::default();
    cache.trust(dir.path(), DirIdentity::of(dir.path()).unwrap());
    cache.read(dir.path(), "acc*", &acc, true).unwrap();
    cache.distrust(dir.path());
    touch(dir.path(), "acc1");
    assert_eq!(cache.read(dir.path(), "acc*", &acc, true).unwrap().len(), 2);
    assert_eq!(cache.kept_count(), 0);
}

#[test]
fn a_watched_directory_removed_is_trusted_no_longer() {
    let dir = tempfile::tempdir().unwrap();
    let cache = ListingCache::default();
    cache.trust(dir.path(), DirIdentity::of(dir.path()).unwrap());
    // An entry removed leaves the directory trusted.
    cache.changed(&dir.path().join("acc0"), true);
    cache.read(dir.path(), "acc*", &acc, true).unwrap();
    assert_eq!(cache.kept_count(), 1);
    // The directory itself removed (or renamed away): its watch went too.
    cache.changed(dir.path(), true);
    touch(dir.path(), "acc1");
    assert_eq!(
        names(&cache.read(dir.path(), "acc*", &acc, true).unwrap()),
        ["acc1"]
    );
    assert_eq!(cache.kept_count(), 0);
}

#[test]
fn another_directory_at_the_watched_path_is_not_kept() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("dev");
    std::fs::create_dir(&dir).unwrap();
    let cache = ListingCache::default();
    cache.trust(&dir, DirIdentity::of(&dir).unwrap());
    // The watched directory moved away and another made in its place:
    // the watch is on the old one, so the new one's listing is never kept.
    std::fs::rename(&dir, base.path().join("old")).unwrap();
    std::fs::create_dir(&dir).unwrap();
    touch(&dir, "acc0");
    assert_eq!(
        names(&cache.read(&dir, "acc*", &acc, true).unwrap()),
        ["acc0"]
    );
    assert_eq!(cache.kept_count(), 0);
    touch(&dir, "acc1");
    assert_eq!(cache.read(&dir, "acc*", &acc, true).unwrap().len(), 2);
}

#[test]
fn a_kept_device_node_keeps_its_numbers() {
    // This machine's own /dev/null, 1:3.
    let dev = Path::new("/dev");
    let cache = ListingCache::default();
    cache.trust(dev, DirIdentity::of(dev).unwrap());
    let wanted = |name: &str| name == "null";
    for _ in 0..2 {
        let listing = cache.read(dev, "null", &wanted, true).unwrap();
        assert_eq!(listing.len(), 1);
        assert_eq!(listing[0].kind, Some(EntryKind::CharDevice));
        let rdev = listing[0].rdev.unwrap();
        assert_eq!((rustix::fs::major(rdev), rustix::fs::minor(rdev)), (1, 3));
    }
    assert_eq!(cache.kept_count(), 1);
}
