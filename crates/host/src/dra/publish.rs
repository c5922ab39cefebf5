//! Keeps one driver's ResourceSlices equal to its resource's device set:
//! every new device set (hardware change, health verdict, reload) becomes
//! a new device list handed to the driver's slice publisher, which writes
//! only what changed and re-creates slices the kubelet wiped.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{DeviceTaint, DraDevice, PublisherHandle, TaintEffect};

use crate::device_set::{DeviceSet, SharedDeviceSet};

/// The DRA devices of `set` for `driver`.
///
/// Interim conversion until `dra::devices` (attributes, label-safe taint
/// values) is merged: names by `wdp_dra_client::naming`, an unhealthy
/// device tainted `<driver>/unhealthy`.
pub fn dra_devices(driver: &str, set: &DeviceSet) -> Vec<DraDevice> {
    set.devices()
        .iter()
        .filter_map(|device| {
            let name = wdp_dra_client::naming::device_name(device.id())
                .inspect_err(|error| tracing::warn!(driver, %error, "device not published"))
                .ok()?;
            let mut dra = DraDevice::new(name);
            if !device.healthy {
                dra = dra.with_taint(DeviceTaint {
                    key: format!("{driver}/unhealthy"),
                    value: "unhealthy".to_owned(),
                    effect: TaintEffect::NoSchedule,
                });
            }
            Some(dra)
        })
        .collect()
}

/// Publishes every device set `devices` sees until `stop`.
pub async fn follow_device_sets(
    driver: String,
    mut devices: watch::Receiver<SharedDeviceSet>,
    publisher: Arc<PublisherHandle>,
    stop: CancellationToken,
) {
    loop {
        let set = devices.borrow_and_update().clone();
        publisher.publish(dra_devices(&driver, &set));
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = devices.changed() => if changed.is_err() { return },
        }
    }
}
