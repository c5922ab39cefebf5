//! Tests of `api_switch`'s pure part: the kubelet IDs PodResources lists
//! become device IDs (the hardware), whatever the replicas.

use std::collections::{BTreeMap, BTreeSet};

use wdp_policy::types::Device;

use super::*;

struct NoCandidates;

impl wdp_resource::CandidateLookup for NoCandidates {
    fn candidate(&self, _: &str) -> Option<&wdp_hardware::Candidate> {
        None
    }
}

#[test]
fn kubelet_ids_of_replicas_map_to_their_device() {
    let devices = vec![
        Device {
            id: "gpu0".to_owned(),
            replicas: 2,
            ..Device::default()
        },
        Device {
            id: "gpu1".to_owned(),
            replicas: 1,
            ..Device::default()
        },
    ];
    let set = DeviceSet::build(&devices, &BTreeMap::new(), &NoCandidates);
    let replica = set.devices()[1].id().to_owned();
    let held: BTreeSet<String> = [replica, "gone7".to_owned()].into();
    assert_eq!(
        device_ids(&set, held),
        BTreeSet::from(["gpu0".to_owned(), "gone7".to_owned()])
    );
}
