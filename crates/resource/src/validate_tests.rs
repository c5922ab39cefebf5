use super::*;

fn device(id: &str, replicas: u32) -> Device {
    Device {
        id: id.into(),
        replicas,
        ..Device::default()
    }
}

#[test]
fn long_duplicate_and_odd_ids_are_refused() {
    let none = BTreeMap::new();
    let err = devices(&[device(&"x".repeat(60), 100)], &none).unwrap_err();
    assert!(err.contains("63"), "{err}");
    assert!(devices(&[device("a", 1), device("a", 1)], &none).is_err());
    assert!(devices(&[device("a b", 1)], &none).is_err());
}

#[test]
fn huge_replica_counts_are_refused_before_building() {
    let err = devices(&[device("gpu", u32::MAX)], &BTreeMap::new()).unwrap_err();
    assert!(err.contains("4294967295 device IDs"), "{err}");
}

#[test]
fn preferred_answers_are_checked() {
    // Positions 0..4 = a b c d; d is not offered.
    let available = [true, true, true, false];
    let id_of = |p: u32| ["a", "b", "c", "d"][p as usize].to_owned();
    preferred(&[0, 1], &available, &[1], 2, id_of).unwrap();
    let refused = |answer: &[u32], must: &[u32], size| {
        preferred(answer, &available, must, size, id_of).unwrap_err()
    };
    assert_eq!(refused(&[0], &[], 2), "answered 1 IDs, 2 were asked for");
    assert_eq!(refused(&[0, 0], &[], 2), "answered \"a\" twice");
    assert_eq!(refused(&[0], &[1], 1), "left out must-include device \"b\"");
    assert_eq!(
        refused(&[3], &[], 1),
        "answered \"d\", which is not available"
    );
    assert_eq!(
        refused(&[9], &[], 1),
        "answered position 9, outside the 4 devices"
    );
}

#[test]
fn oversized_answers_are_refused() {
    let mut response = ContainerGrant::default();
    response.envs.insert("BIG".into(), "x".repeat(5 << 20));
    let err = container_grant(&response).unwrap_err();
    assert!(err.contains("4194304-byte"), "{err}");
}
