use super::*;

#[test]
fn a_checkpoint_written_before_partitions_and_statuses_reads_as_it_is() {
    // The bytes of a record as hosts before WIT 0.1.2 wrote them.
    let claims = r#"{"uid-1":{"namespace":"default","name":"c","devices":[{"request_names":["gpu"],"pool_name":"node-a","device_name":"gpu0","device_id":"gpu0","cdi_device_ids":["example.com/gpu=uid-1-gpu0"],"admin_access":false}],"cdi_spec":"/var/run/cdi/x.json"}}"#;
    let file = format!(
        r#"{{"version":1,"driver":"gpu.example.com","checksum":"{}","claims":{claims}}}"#,
        fnv1a(claims.as_bytes())
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("dra")).unwrap();
    std::fs::write(dir.path().join("dra/gpu.example.com.json"), file).unwrap();
    let checkpoint = Checkpoint::load(dir.path(), "gpu.example.com");
    assert_eq!(
        checkpoint.set_aside(),
        None,
        "an upgrade must not set it aside"
    );
    let claim = &checkpoint.claims()["uid-1"];
    assert_eq!(claim.devices[0].device_id, "gpu0");
    assert!(!claim.devices[0].shared && claim.devices[0].partition_of.is_none());
    assert!(!claim.status_written);
    assert!(
        claim.device_metadata.is_none(),
        "no metadata files recorded"
    );
}

fn claim(device_id: &str, admin_access: bool) -> PreparedClaim {
    PreparedClaim {
        namespace: "default".into(),
        name: "c".into(),
        devices: vec![PreparedDevice {
            request_names: vec!["gpu".into()],
            pool_name: "node-a".into(),
            device_name: device_id.into(),
            device_id: device_id.into(),
            partition_of: None,
            consumed_capacity: Vec::new(),
            shared: false,
            cdi_device_ids: vec![format!("example.com/gpu=uid-{device_id}")],
            share_id: None,
            admin_access,
            unknown: Default::default(),
        }],
        cdi_spec: Some(PathBuf::from("/var/run/cdi/x.json")),
        status_written: false,
        device_metadata: None,
        passthrough: Vec::new(),
        unknown: Default::default(),
    }
}

#[test]
fn survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "gpu.example.com");
    checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
    checkpoint.insert("uid-2", claim("gpu1", false)).unwrap();
    checkpoint.remove("uid-2").unwrap();
    let reloaded = Checkpoint::load(dir.path(), "gpu.example.com");
    assert_eq!(reloaded.claims().len(), 1);
    assert_eq!(reloaded.get("uid-1"), Some(&claim("gpu0", false)));
    assert_eq!(
        reloaded.path(),
        dir.path().join("dra").join("gpu.example.com.json")
    );
}

#[test]
fn a_device_is_held_by_one_claim_unless_admin_access() {
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
    checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
    checkpoint.insert("uid-2", claim("gpu1", true)).unwrap();
    assert_eq!(checkpoint.holder_of("gpu0", "uid-9"), Some("uid-1"));
    assert_eq!(checkpoint.holder_of("gpu0", "uid-1"), None);
    assert_eq!(checkpoint.holder_of("gpu1", "uid-9"), None);
}

#[test]
fn a_corrupt_or_tampered_file_is_set_aside_untouched_and_new_claims_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
    checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
    let path = checkpoint.path().to_owned();
    let tampered = std::fs::read_to_string(&path)
        .unwrap()
        .replace("gpu0", "gpu7");
    std::fs::write(&path, &tampered).unwrap();

    let mut reloaded = Checkpoint::load(dir.path(), "d.example.com");
    assert!(reloaded.claims().is_empty());
    let aside = reloaded.set_aside().expect("set aside").to_owned();
    assert!(
        aside
            .to_string_lossy()
            .contains("d.example.com.json.unreadable-")
    );
    assert_eq!(std::fs::read_to_string(&aside).unwrap(), tampered);
    assert!(!path.exists());
    // New claims are recorded in a fresh file.
    reloaded.insert("uid-2", claim("gpu1", false)).unwrap();
    let again = Checkpoint::load(dir.path(), "d.example.com");
    assert_eq!(again.claims().keys().collect::<Vec<_>>(), ["uid-2"]);

    // Not JSON at all, and another driver's file: set aside the same way.
    std::fs::write(&path, b"{ not json").unwrap();
    assert!(
        Checkpoint::load(dir.path(), "d.example.com")
            .claims()
            .is_empty()
    );
    let mut ours = Checkpoint::load(dir.path(), "e.example.com");
    ours.insert("uid-3", claim("gpu3", false)).unwrap();
    std::fs::copy(ours.path(), checkpoint_path(dir.path(), "f.example.com")).unwrap();
    let theirs = Checkpoint::load(dir.path(), "f.example.com");
    assert!(theirs.claims().is_empty());
    assert!(theirs.set_aside().is_some());
}

#[test]
fn a_batch_of_changes_is_written_at_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
    checkpoint.insert("uid-0", claim("gpu9", false)).unwrap();
    checkpoint
        .commit(vec![
            Change::Insert("uid-1".into(), claim("gpu0", false)),
            Change::Insert("uid-2".into(), claim("gpu1", false)),
            Change::Remove("uid-1".into()),
            Change::Remove("uid-0".into()),
        ])
        .unwrap();
    let reloaded = Checkpoint::load(dir.path(), "d.example.com");
    assert_eq!(reloaded.claims().keys().collect::<Vec<_>>(), ["uid-2"]);
}

#[test]
fn two_instances_sharing_the_file_keep_each_others_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut old = Checkpoint::load(dir.path(), "d.example.com");
    let mut new = Checkpoint::load(dir.path(), "d.example.com");
    old.insert("uid-1", claim("gpu0", false)).unwrap();
    new.insert("uid-2", claim("gpu1", false)).unwrap();
    old.refresh().unwrap();
    assert_eq!(old.claims().len(), 2);
    assert_eq!(old.holder_of("gpu1", "uid-9"), Some("uid-2"));
    // A claim the old instance prepared is unprepared by the new one.
    assert!(new.remove("uid-1").unwrap().is_some());
    old.refresh().unwrap();
    assert_eq!(old.claims().keys().collect::<Vec<_>>(), ["uid-2"]);

    // Writers in two threads at once: no record is lost.
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let state = dir.path().to_owned();
            std::thread::spawn(move || {
                let mut checkpoint = Checkpoint::load(&state, "d.example.com");
                for n in 0..40 {
                    let uid = format!("{who}-{n}");
                    checkpoint.insert(&uid, claim(&uid, false)).unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    assert_eq!(
        Checkpoint::load(dir.path(), "d.example.com").claims().len(),
        81
    );
}

#[test]
fn staged_changes_are_seen_at_once_and_undone_when_the_file_cannot_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "gpu.example.com");
    checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
    let staged = checkpoint
        .stage(vec![
            Change::Insert("uid-2".into(), claim("gpu1", false)),
            Change::Remove("uid-1".into()),
        ])
        .unwrap();
    // Readers see the changes while the file is being written.
    assert!(checkpoint.get("uid-2").is_some() && checkpoint.get("uid-1").is_none());
    // A folder where the file goes: the rename over it fails.
    let path = checkpoint.path().to_owned();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir_all(path.join("in-the-way")).unwrap();
    let error = checkpoint.finish(staged.write()).unwrap_err();
    assert_eq!(error.path, path);
    assert_eq!(checkpoint.get("uid-1"), Some(&claim("gpu0", false)));
    assert_eq!(checkpoint.get("uid-2"), None);
}

/// A checkpoint as a newer host (format version 2) might write it: a field
/// this host does not know in a device, in a claim and at the top, keys in
/// the newer host's own order, and a canonical checksum.
fn future_file(driver: &str) -> String {
    let claims = serde_json::json!({
        "uid-1": {
            "name": "c",
            "namespace": "default",
            "mig-profile": "1g.10gb",
            "devices": [{
                "device_id": "gpu0",
                "request_names": ["gpu"],
                "pool_name": "node-a",
                "device_name": "gpu0",
                "cdi_device_ids": ["example.com/gpu=uid-1-gpu0"],
                "admin_access": false,
                "binding-conditions": ["attached"]
            }],
            "cdi_spec": "/var/run/cdi/x.json"
        }
    });
    serde_json::json!({
        "version": 2,
        "driver": driver,
        "checksum": "written-by-a-newer-host",
        "canonical-checksum": canonical_checksum(&claims),
        "claims": claims,
        "epoch": 7
    })
    .to_string()
}

#[test]
fn a_newer_hosts_checkpoint_is_read_changed_and_written_back_with_its_unknown_fields() {
    let dir = tempfile::tempdir().unwrap();
    let driver = "gpu.example.com";
    std::fs::create_dir_all(dir.path().join("dra")).unwrap();
    std::fs::write(checkpoint_path(dir.path(), driver), future_file(driver)).unwrap();

    // Read, not set aside for being newer.
    let mut checkpoint = Checkpoint::load(dir.path(), driver);
    assert_eq!(checkpoint.set_aside(), None);
    assert_eq!(checkpoint.claims()["uid-1"].devices[0].device_id, "gpu0");

    // Changed and written back by this host...
    checkpoint.insert("uid-2", claim("gpu1", false)).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.path()).unwrap()).unwrap();
    // ...every unknown field is still there, where the newer host put it.
    assert_eq!(written["version"], 2);
    assert_eq!(written["epoch"], 7);
    assert_eq!(written["claims"]["uid-1"]["mig-profile"], "1g.10gb");
    assert_eq!(
        written["claims"]["uid-1"]["devices"][0]["binding-conditions"][0],
        "attached"
    );
    // And the checksum verifies: a fresh reader (this host after a
    // restart, or the newer host after a roll forward) reads both claims.
    assert_eq!(
        written["canonical-checksum"],
        canonical_checksum(&written["claims"])
    );
    let again = Checkpoint::load(dir.path(), driver);
    assert_eq!(again.set_aside(), None);
    assert_eq!(
        again.claims().keys().collect::<Vec<_>>(),
        ["uid-1", "uid-2"]
    );
    // Unprepared by this host, the newer claim goes with its fields.
    let mut again = again;
    let removed = again.remove("uid-1").unwrap().unwrap();
    assert_eq!(removed.unknown["mig-profile"], "1g.10gb");
}

#[test]
fn a_newer_hosts_checkpoint_with_a_changed_claim_is_still_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let driver = "gpu.example.com";
    std::fs::create_dir_all(dir.path().join("dra")).unwrap();
    let tampered = future_file(driver).replace("gpu0", "gpu7");
    std::fs::write(checkpoint_path(dir.path(), driver), tampered).unwrap();
    let checkpoint = Checkpoint::load(dir.path(), driver);
    assert!(checkpoint.claims().is_empty());
    assert!(checkpoint.set_aside().is_some());
}

#[test]
fn what_this_host_writes_verifies_for_hosts_before_the_canonical_checksum() {
    // Hosts before `canonical-checksum` verify `checksum` over the claims
    // as they serialize them: for records with no field new to them, the
    // same bytes this host hashes.
    let dir = tempfile::tempdir().unwrap();
    let mut checkpoint = Checkpoint::load(dir.path(), "d.example.com");
    checkpoint.insert("uid-1", claim("gpu0", false)).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(checkpoint.path()).unwrap()).unwrap();
    // An older host reads the claims into its own records (these fields,
    // without `unknown`, which serializes to nothing when empty) and hashes
    // them serialized again.
    let theirs: BTreeMap<String, PreparedClaim> =
        serde_json::from_value(written["claims"].clone()).unwrap();
    assert!(theirs["uid-1"].unknown.is_empty());
    let serialized = serde_json::to_string(&theirs).unwrap();
    assert!(!serialized.contains("unknown"), "{serialized}");
    assert_eq!(written["checksum"], fnv1a(serialized.as_bytes()));
}
