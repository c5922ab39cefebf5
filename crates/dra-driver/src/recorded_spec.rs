//! A prepared claim's CDI spec, derived from its checkpoint record.
//!
//! The checkpoint (in the state folder, on disk) is the one file a prepare
//! syncs; a claim's spec is renamed into the CDI folder without syncing.
//! The CDI folder is usually `/var/run/cdi`, a tmpfs that a reboot
//! empties, while the checkpoint survives it. After a reboot the kubelet
//! calls `NodePrepareResources` again for every claim of the pods it
//! starts (its own record of which claims are prepared is kept in memory),
//! and the driver answers from the checkpoint; the spec that answer names
//! must then be there. So a repeated prepare checks the claim's spec and
//! writes it again, durably, when it is missing or is not the one written
//! for the claim (a power loss can leave an unsynced file empty): the
//! `allocate` hook (guest or built-in) runs again for the recorded
//! devices, as they are on the node now.

use std::path::Path;
use std::sync::Arc;

use wdp_resource::AdvertisedDevice;
use wdp_resource::Resource;

use crate::allocation::{advertised_device, recorded_claim_info};
use crate::checkpoint::PreparedClaim;
use crate::claim::ClaimRef;
use crate::claim_cdi;

/// Far more than a claim's spec holds (its devices' nodes and the
/// `allocate` answer, both bounded by the resource limits).
const LARGEST_SPEC: u64 = 16 * 1024 * 1024;

/// Whether `file` is the spec written for claim `uid` as `record` has it:
/// JSON naming a CDI device for each recorded device and metadata file.
pub(crate) fn is_intact(file: &Path, uid: &str, record: &PreparedClaim) -> bool {
    // Only a plain file of a spec's size is read: anything else in its
    // place (a pipe would block the read) is replaced by the rebuild.
    let plain = std::fs::symlink_metadata(file)
        .is_ok_and(|meta| meta.is_file() && meta.len() <= LARGEST_SPEC);
    if !plain {
        return false;
    }
    let Ok(text) = std::fs::read(file) else {
        return false;
    };
    let Ok(spec) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return false;
    };
    let names: Vec<&str> = spec["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|device| device["name"].as_str())
        .collect();
    let metadata_mounts = record
        .device_metadata
        .iter()
        .flat_map(|metadata| &metadata.files)
        .all(|file| names.contains(&file.cdi_device.as_str()));
    metadata_mounts
        && record.devices.iter().all(|device| {
            names.contains(&claim_cdi::cdi_device_name(uid, &device.device_name).as_str())
        })
}

/// Writes `claim`'s spec `file` again from its `record`: `allocate` runs
/// for the recorded devices of `resource`. The error names the claim, the
/// file and why (a device no longer on the node or unhealthy, the guest's
/// refusal, the write).
pub(crate) async fn rebuild(
    resource: &Resource,
    claim: &ClaimRef,
    record: &PreparedClaim,
    file: &Path,
) -> Result<(), String> {
    let cannot = |why: String| {
        format!(
            "claim {claim}: its CDI spec {} is missing or damaged (the node restarted?) and cannot be written again: {why}",
            file.display()
        )
    };
    let set = resource.devices();
    // The advertised device of each recorded one (a partition's parent),
    // with its DRA name.
    let mut named: Vec<(&AdvertisedDevice, String)> = Vec::new();
    for recorded in &record.devices {
        let id = recorded
            .partition_of
            .as_deref()
            .unwrap_or(&recorded.device_id);
        let device = advertised_device(&set, id).ok_or_else(|| {
            cannot(format!(
                "device {:?} (ID {id:?}) is no longer among the devices of {} on this node",
                recorded.device_name,
                resource.name()
            ))
        })?;
        if !device.healthy {
            return Err(cannot(format!(
                "device {:?} (ID {id:?}) is unhealthy: {}",
                recorded.device_name, device.reason
            )));
        }
        if !named.iter().any(|(_, name)| *name == recorded.device_name) {
            named.push((device, recorded.device_name.clone()));
        }
    }
    let mut ids: Vec<String> = Vec::new();
    for (device, _) in &named {
        if !ids.iter().any(|id| id == device.id()) {
            ids.push(device.id().to_owned());
        }
    }
    let info = Arc::new(recorded_claim_info(claim, record));
    let answer = wdp_resource::with_claim(info, resource.allocate(&ids))
        .await
        .map_err(|error| cannot(format!("allocate: {error}")))?;
    let spec = resource.spec();
    let mut cdi_spec =
        claim_cdi::claim_spec(&spec.config, &claim.uid, &named, set.companions(), &answer);
    claim_cdi::add_metadata_mounts(&mut cdi_spec, record.device_metadata.as_deref());
    wdp_cdi::write_file(file, &cdi_spec).map_err(|error| cannot(error.to_string()))
}
