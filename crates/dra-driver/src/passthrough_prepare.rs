//! The prepare side of passthrough bound on demand: a claim's devices
//! bound (when not bound for it yet) before it is prepared, with a wait
//! for the rescan to show their VFIO nodes; a recorded claim's groups
//! bound again after a node restart (the journal reseeded from the
//! checkpoint's copy first); a claim's groups bound back at unprepare.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::resource::v1::DeviceRequestAllocationResult;
use wdp_passthrough::{BoundGroup, GroupRecord};
use wdp_resource::{DeviceSet, Resource};

use super::{BindFailure, pci_functions};
use crate::checkpoint::PreparedClaim;
use crate::claim::ClaimRef;
use crate::prepare::ClaimPreparer;
/// Binds the groups of the advertised devices `ids` for `claim`; answers
/// each device's bound groups, in the order of `ids`.
///
/// Devices on IOMMU groups of their own are bound side by side: a real
/// driver takes from a fraction of a second to seconds to let a function
/// go and `vfio-pci` to take it, and a virtual machine asks for up to
/// eight GPUs at once. Devices sharing a group are bound one after
/// another (one operation runs per group). The first failure in the order
/// of `ids` is answered once every bind started has ended; the groups
/// bound meanwhile stay recorded for the claim and are bound back when it
/// goes, as after a failure of one device alone.
pub(super) async fn bind_devices(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    ids: &[String],
) -> Result<Vec<(String, BoundGroup)>, BindFailure> {
    let Some(binds) = preparer.passthrough() else {
        return Ok(Vec::new());
    };
    let set = preparer.resource().devices();
    let mut devices = Vec::new();
    for id in ids {
        let Some(device) = set.get(id) else {
            return Err(BindFailure::Device(format!(
                "device {id:?} is not among the resource's devices now"
            )));
        };
        let functions = pci_functions(device);
        if functions.is_empty() {
            return Err(BindFailure::Device(format!(
                "device {id:?} has no PCI function to bind (no pci.address fact)"
            )));
        }
        devices.push((id.clone(), functions));
    }
    let others = held_functions(preparer, &claim.uid).await;
    let groups = binds
        .groups_of(devices.iter().map(|(_, f)| f.clone()).collect())
        .await?;
    let lanes = sharing_groups(&groups);
    let lanes_done = futures::future::join_all(lanes.into_iter().map(|lane| {
        let (devices, others) = (&devices, &others);
        async move {
            let mut done = Vec::new();
            for index in lane {
                let (id, functions) = &devices[index];
                let outcome = binds
                    .ensure_bound(preparer.resource(), claim, id, functions, others)
                    .await;
                let failed = outcome.is_err();
                done.push((index, outcome));
                if failed {
                    break;
                }
            }
            done
        }
    }))
    .await;
    let mut outcomes: Vec<_> = lanes_done.into_iter().flatten().collect();
    outcomes.sort_by_key(|(index, _)| *index);
    let mut bound = Vec::new();
    for (index, outcome) in outcomes {
        for group in outcome? {
            bound.push((devices[index].0.clone(), group));
        }
    }
    Ok(bound)
}

/// Splits devices, given the IOMMU groups of each, into lanes whose
/// devices share no group with another lane's: each lane holds indices
/// into `groups`, ascending, and lanes are ordered by their first device.
/// A device sharing a group with two lanes joins them into one.
fn sharing_groups(groups: &[BTreeSet<String>]) -> Vec<Vec<usize>> {
    let mut lanes: Vec<(BTreeSet<String>, Vec<usize>)> = Vec::new();
    for (index, device_groups) in groups.iter().enumerate() {
        let mut lane = (device_groups.clone(), vec![index]);
        let mut kept = Vec::new();
        for (lane_groups, members) in lanes {
            if lane_groups.is_disjoint(device_groups) {
                kept.push((lane_groups, members));
            } else {
                lane.0.extend(lane_groups);
                lane.1.extend(members);
            }
        }
        lane.1.sort_unstable();
        kept.push(lane);
        lanes = kept;
    }
    let mut lanes: Vec<Vec<usize>> = lanes.into_iter().map(|(_, members)| members).collect();
    lanes.sort_by_key(|members| members[0]);
    lanes
}

/// Before a claim is prepared: binds the groups of the devices `results`
/// name (when not bound for it yet) and waits until the device set shows
/// their VFIO nodes. The error names the claim's device and why.
pub(crate) async fn bind_for_prepare(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    results: &[DeviceRequestAllocationResult],
) -> Result<(), String> {
    if preparer.passthrough().is_none() || preparer.resource().spec().config.passthrough.is_none() {
        return Ok(());
    }
    let mut ids = Vec::new();
    for result in results.iter().filter(|r| r.pool == preparer.pool()) {
        let id = wdp_k8s_naming::device_id(&result.device)
            .map_err(|e| format!("claim {claim}: device {:?}: {e}", result.device))?;
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    bind_and_wait(preparer, claim, &ids).await
}

/// A recorded claim answered again (the kubelet asks after a restart):
/// its groups are bound again when a node restart put them back on their
/// drivers.
pub(crate) async fn bind_recorded(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    record: &PreparedClaim,
) -> Result<(), String> {
    if preparer.passthrough().is_none() || preparer.resource().spec().config.passthrough.is_none() {
        return Ok(());
    }
    if let Some(binds) = preparer.passthrough() {
        if binds.journal.is_err()
            && !record.passthrough.is_empty()
            && record.passthrough.iter().all(|r| binds.binder.is_bound(r))
        {
            // Bound as recorded: the answer stands without the journal.
            return Ok(());
        }
        binds.reseed(&record.passthrough);
    }
    let mut ids: Vec<String> = Vec::new();
    for device in &record.devices {
        let id = device
            .partition_of
            .clone()
            .unwrap_or_else(|| device.device_id.clone());
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    bind_and_wait(preparer, claim, &ids).await
}

/// Binds `ids`' groups for `claim` and waits for their VFIO nodes in the
/// device set.
async fn bind_and_wait(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    ids: &[String],
) -> Result<(), String> {
    let bound = bind_devices(preparer, claim, ids)
        .await
        .map_err(|e| format!("claim {claim}: passthrough bind: {e}"))?;
    let within = preparer
        .resource()
        .spec()
        .config
        .passthrough
        .as_ref()
        .map_or(wdp_config::DEFAULT_BIND_TIMEOUT, |p| p.bind_timeout);
    wait_for_vfio_nodes(preparer.resource(), &bound, within)
        .await
        .map_err(|e| format!("claim {claim}: {e}"))
}

/// Waits until every device of `bound` shows its group's VFIO node in the
/// resource's device set (a rescan is asked for), at most `within`.
async fn wait_for_vfio_nodes(
    resource: &Resource,
    bound: &[(String, BoundGroup)],
    within: Duration,
) -> Result<(), String> {
    let shows = |set: &DeviceSet| {
        bound.iter().all(|(id, group)| {
            let node = format!("/dev/vfio/{}", group.group);
            set.get(id)
                .is_some_and(|d| d.device.nodes.iter().any(|n| n.path == node))
        })
    };
    if shows(&resource.devices()) {
        return Ok(());
    }
    let mut sets = resource.subscribe();
    resource.request_refresh();
    match tokio::time::timeout(within, sets.wait_for(|set| shows(set))).await {
        Ok(Ok(_)) => Ok(()),
        _ => {
            let missing: Vec<String> = bound
                .iter()
                .map(|(id, g)| format!("{id}: /dev/vfio/{}", g.group))
                .collect();
            Err(format!(
                "the devices were bound, but the rescan did not show their VFIO nodes within {within:?} ({}); does a selector of the resource require the device's own driver?",
                missing.join(", ")
            ))
        }
    }
}

/// After a claim is unprepared (or gone unprepared): binds its groups back
/// to the drivers they had.
pub(crate) async fn release(preparer: &ClaimPreparer, uid: &str) -> Result<(), String> {
    release_recorded(preparer, uid, &[]).await
}

/// [`release`] for a prepared claim whose checkpoint record kept
/// `recorded`, the groups bound for it: those the journal lost are bound
/// back too.
pub(crate) async fn release_recorded(
    preparer: &ClaimPreparer,
    uid: &str,
    recorded: &[GroupRecord],
) -> Result<(), String> {
    match preparer.passthrough() {
        Some(binds) => binds.release(preparer.resource(), uid, recorded).await,
        None => Ok(()),
    }
}

/// The groups the journal holds bound for claim `uid` (what its checkpoint
/// record keeps a copy of).
pub(crate) fn bound_groups(preparer: &ClaimPreparer, uid: &str) -> Vec<GroupRecord> {
    preparer
        .passthrough()
        .and_then(|binds| binds.records().remove(uid))
        .unwrap_or_default()
}

/// The PCI functions the prepared claims other than `uid` hold, with the
/// claim holding each (`namespace/name`).
pub(crate) async fn held_functions(
    preparer: &ClaimPreparer,
    uid: &str,
) -> BTreeMap<String, String> {
    let set = preparer.resource().devices();
    let mut held = BTreeMap::new();
    for (other, record) in preparer.prepared_claims().await {
        if other == uid {
            continue;
        }
        for device in &record.devices {
            let id = device.partition_of.as_deref().unwrap_or(&device.device_id);
            if let Some(advertised) = set.get(id) {
                for function in pci_functions(advertised) {
                    held.insert(
                        function,
                        format!("{}/{} ({other})", record.namespace, record.name),
                    );
                }
            }
        }
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(devices: &[&[&str]]) -> Vec<BTreeSet<String>> {
        devices
            .iter()
            .map(|d| d.iter().map(|g| (*g).to_owned()).collect())
            .collect()
    }

    #[test]
    fn devices_on_groups_of_their_own_get_a_lane_each() {
        let lanes = sharing_groups(&groups(&[&["13"], &["15"], &["16"]]));
        assert_eq!(lanes, vec![vec![0], vec![1], vec![2]]);
    }

    #[test]
    fn devices_sharing_a_group_share_a_lane_in_their_order() {
        let lanes = sharing_groups(&groups(&[&["13"], &["15"], &["13"], &["16"]]));
        assert_eq!(lanes, vec![vec![0, 2], vec![1], vec![3]]);
    }

    #[test]
    fn a_device_on_two_lanes_groups_joins_them() {
        let lanes = sharing_groups(&groups(&[&["1"], &["2"], &["3"], &["1", "2"]]));
        assert_eq!(lanes, vec![vec![0, 1, 3], vec![2]]);
    }

    #[test]
    fn devices_without_a_readable_group_run_alone() {
        let lanes = sharing_groups(&groups(&[&[], &[], &["7"]]));
        assert_eq!(lanes, vec![vec![0], vec![1], vec![2]]);
    }
}
