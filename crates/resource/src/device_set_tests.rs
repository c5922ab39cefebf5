//! Tests of the device set: expansion, lookup, request resolution and
//! reading a set back (the list's encoded size is checked against the
//! kubelet's message in `wdp-device-plugin`).

use super::*;

/// The verdicts of a refresh where only `id` is unhealthy, for `reason`.
fn unhealthy(id: &str, reason: &str) -> BTreeMap<String, Verdict> {
    BTreeMap::from([(
        id.to_owned(),
        Verdict {
            id: id.into(),
            healthy: false,
            reason: reason.into(),
        },
    )])
}

#[test]
fn replicas_expand_into_suffixed_ids() {
    let device = Device {
        id: "fuse".into(),
        replicas: 3,
        ..Device::default()
    };
    assert_eq!(advertised_count(std::slice::from_ref(&device)), 3);
    let set = DeviceSet::build(&[device], &BTreeMap::new(), &BTreeMap::new());
    let ids: Vec<&str> = set.devices().iter().map(|d| d.id()).collect();
    assert_eq!(ids, ["fuse::0", "fuse::1", "fuse::2"]);
    assert!(set.devices().iter().all(|d| d.healthy));
}

#[test]
fn a_request_resolves_in_its_own_order_and_duplicates_are_refused_by_name() {
    let devices: Vec<Device> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|id| Device {
            id: id.into(),
            ..Device::default()
        })
        .collect();
    let verdicts = unhealthy("d", "hot");
    let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
    let ids = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        set.resolve_indexes(&ids(&["c", "a", "b"]), true),
        Ok(vec![2, 0, 1])
    );
    assert_eq!(
        set.resolve_indexes(&ids(&["c", "a", "c"]), true),
        Err("device \"c\" is listed twice".to_owned())
    );
    assert_eq!(
        set.resolve_indexes(&ids(&["a", "zz"]), true),
        Err("unknown device \"zz\"".to_owned())
    );
    assert_eq!(
        set.resolve_indexes(&ids(&["d"]), true),
        Err("device \"d\" is unhealthy: hot".to_owned())
    );
    assert_eq!(set.resolve_indexes(&ids(&["d"]), false), Ok(vec![3]));
}

#[test]
fn every_id_is_found_at_its_sorted_position_and_no_other_id_is() {
    // PCI-like IDs sharing long prefixes, plus replicas of one device.
    let mut devices: Vec<Device> = (0..2000)
        .map(|i| Device {
            id: format!("0000:{:02x}:{:02x}.0", i / 32, i % 32),
            ..Device::default()
        })
        .collect();
    devices.push(Device {
        id: "0000:00:00.0-shared".into(),
        replicas: 4,
        ..Device::default()
    });
    let set = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
    assert_eq!(set.len(), 2004);
    for (position, device) in set.devices().iter().enumerate() {
        assert_eq!(set.position(device.id()), Some(position), "{}", device.id());
    }
    for unknown in [
        "",
        "0000:00:00",
        "0000:00:00.0-shared",
        "0000:3f:1f.0",
        "0000:00:00.0::0",
    ] {
        assert_eq!(set.position(unknown), None, "{unknown:?}");
    }
    assert_eq!(DeviceSet::default().position("anything"), None);
}

#[test]
fn devices_and_verdicts_read_back_from_a_set_build_it_again() {
    let device = |id: &str, candidates: &[&str], replicas: u32| Device {
        id: id.into(),
        candidates: candidates.iter().map(|c| c.to_string()).collect(),
        numa_nodes: vec![1],
        attributes: vec![("k".into(), id.into())],
        replicas,
    };
    let devices = [
        device("own", &["own"], 1),
        device("pair", &["c1", "c2"], 1),
        device("other", &["c3"], 1),
        device("none", &[], 1),
        device("shared", &["shared"], 3),
    ];
    let verdicts = unhealthy("shared", "hot");
    let set = DeviceSet::build(&devices, &verdicts, &BTreeMap::new());
    let again = set.devices_advertised();
    assert_eq!(again.len(), devices.len());
    for d in &devices {
        assert!(again.contains(d), "{d:?} missing from {again:?}");
    }
    let read: BTreeMap<String, Verdict> = set
        .verdicts()
        .into_iter()
        .map(|(id, v)| (id.to_owned(), v))
        .collect();
    assert_eq!(read.len(), devices.len());
    assert!(!read["shared"].healthy);
    assert_eq!(read["shared"].reason, "hot");
    assert!(read["own"].healthy);
    assert_eq!(DeviceSet::build(&again, &read, &BTreeMap::new()), set);
    assert_eq!(set.get("pair").unwrap().candidates(), ["c1", "c2"]);
    assert_eq!(set.get("own").unwrap().candidates(), ["own"]);
    assert!(set.get("none").unwrap().candidates().is_empty());
}

#[test]
fn counts_saturate_instead_of_overflowing() {
    let huge = Device {
        id: "x".into(),
        replicas: u32::MAX,
        ..Device::default()
    };
    let many = vec![huge; 8];
    assert!(advertised_count(&many) >= 8 * u32::MAX as usize);
}

#[test]
fn every_build_is_a_new_generation_but_equal_sets_compare_equal() {
    let devices = [
        Device {
            id: "b".into(),
            ..Device::default()
        },
        Device {
            id: "a".into(),
            ..Device::default()
        },
    ];
    let one = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
    let two = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
    assert_ne!(one.generation(), two.generation());
    assert_eq!(one, two);
    // Positions follow ID order.
    let ids = ["b".to_owned(), "a".to_owned()];
    assert_eq!(one.resolve_indexes(&ids, true).unwrap(), [1, 0]);
}

#[test]
fn resolve_names_the_bad_id() {
    let device = Device {
        id: "a".into(),
        ..Device::default()
    };
    let verdicts = unhealthy("a", "too hot");
    let set = DeviceSet::build(&[device], &verdicts, &BTreeMap::new());
    let err = set.resolve(&["b".into()], false).unwrap_err();
    assert!(err.contains("\"b\""), "{err}");
    let err = set.resolve(&["a".into()], true).unwrap_err();
    assert!(err.contains("too hot"), "{err}");
    assert!(set.resolve(&["a".into(), "a".into()], false).is_err());
}

#[test]
fn health_changes_name_devices_turning_unhealthy_and_back() {
    let devices: Vec<Device> = ["a", "b", "c"]
        .into_iter()
        .map(|id| Device {
            id: id.into(),
            ..Device::default()
        })
        .collect();
    let empty = DeviceSet::build(&[], &BTreeMap::new(), &BTreeMap::new());
    let healthy = DeviceSet::build(&devices, &BTreeMap::new(), &BTreeMap::new());
    let b_hot = DeviceSet::build(&devices, &unhealthy("b", "hot"), &BTreeMap::new());
    let b_gone = DeviceSet::build(&devices, &unhealthy("b", "gone"), &BTreeMap::new());

    let b_unhealthy = |reason| HealthChange::Unhealthy { id: "b", reason };

    // At start, only what is unhealthy is news.
    assert_eq!(health_changes(&empty, &healthy), []);
    assert_eq!(health_changes(&empty, &b_hot), [b_unhealthy("hot")]);
    assert_eq!(health_changes(&healthy, &b_hot), [b_unhealthy("hot")]);
    // The same reason again is no change; another reason is.
    assert_eq!(health_changes(&b_hot, &b_hot), []);
    assert_eq!(health_changes(&b_hot, &b_gone), [b_unhealthy("gone")]);
    assert_eq!(
        health_changes(&b_gone, &healthy),
        [HealthChange::Recovered { id: "b" }]
    );
    // A device that left is not a health change.
    assert_eq!(health_changes(&b_gone, &empty), []);
}
