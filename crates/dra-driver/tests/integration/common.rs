//! What the test files share: a device set with some devices unhealthy.

use std::collections::BTreeMap;
use std::sync::Arc;

use wdp_policy::types::{Device, Verdict};
use wdp_resource::DeviceSet;
use wdp_resource::SharedDeviceSet;

/// `devices`, each healthy but those of `unhealthy` (ID, reason).
pub fn device_set_of(devices: &[Device], unhealthy: &[(&str, &str)]) -> SharedDeviceSet {
    let verdicts = unhealthy
        .iter()
        .map(|(id, reason)| {
            (
                id.to_string(),
                Verdict {
                    id: id.to_string(),
                    healthy: false,
                    reason: reason.to_string(),
                },
            )
        })
        .collect();
    Arc::new(DeviceSet::build(devices, &verdicts, &BTreeMap::new()))
}
