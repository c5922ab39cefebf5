use super::*;
use crate::validate::preferred as validate_preferred;
use wdp_policy::types::DeviceRef;

fn device(id: &str, numa: &[i64]) -> AdvertisedDevice {
    AdvertisedDevice::new(
        DeviceRef {
            id: id.into(),
            device_id: id.into(),
            numa_nodes: numa.to_vec(),
            ..DeviceRef::default()
        },
        true,
        String::new(),
        &[],
    )
}

#[test]
fn preferred_keeps_must_include_and_packs_numa() {
    let devs = [
        device("a", &[0]),
        device("b", &[1]),
        device("c", &[1]),
        device("d", &[0]),
    ];
    let answer = preferred(&devs, &[0, 1, 2, 3], &[1], 2);
    assert_eq!(
        answer,
        [1, 2],
        "b (must include), then c beside it on node 1"
    );
    let id_of = |p: u32| devs[p as usize].id().to_owned();
    validate_preferred(&answer, &[true; 4], &[1], 2, id_of).unwrap();
    // Without must-include: the node with the most free devices, then
    // ID order; devices not available are never chosen.
    assert_eq!(preferred(&devs, &[0, 2, 3], &[], 2), [0, 3]);
    assert_eq!(preferred(&devs, &[1, 2], &[], 2), [1, 2]);
}

#[test]
fn gone_candidates_make_a_device_unhealthy() {
    let d = Device {
        id: "gpu".into(),
        candidates: vec!["0000:01:00.0".into()],
        ..Device::default()
    };
    let v = verdict(&d, |_| false);
    assert!(!v.healthy);
    assert!(v.reason.contains("0000:01:00.0"), "{}", v.reason);
    assert!(verdict(&d, |id| id == "0000:01:00.0").healthy);
}

#[test]
fn packing_helps_only_across_numa_nodes() {
    let on = |id: &str, numa_nodes: Vec<i64>| Candidate {
        id: id.into(),
        kind: wdp_hardware::CandidateKind::Pci,
        numa_nodes,
        attributes: wdp_hardware::Attributes::default(),
        nodes: Vec::new(),
        sysfs_dir: None,
    };
    assert!(!packing_helps(&[]));
    assert!(
        !packing_helps(&[on("a", vec![]), on("b", vec![])]),
        "no NUMA facts"
    );
    assert!(!packing_helps(&[
        on("a", vec![0]),
        on("b", vec![0]),
        on("c", vec![])
    ]));
    assert!(packing_helps(&[on("a", vec![0]), on("b", vec![1])]));
    assert!(
        packing_helps(&[on("a", vec![0, 1])]),
        "one device across two nodes"
    );
}
