//! The claim watch of passthrough bound on demand: while this instance
//! publishes the slices, every claim added, changed, deleted or listed is
//! looked at; one whose results of this driver and pool wait on
//! [`BOUND_CONDITION`] gets its devices' groups bound and the outcome
//! written into its `status.devices` (the condition, or the failure
//! condition with the reason); one gone or deallocated before it was
//! prepared gets its groups bound back.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::ClaimEvent;

use super::prepare_side::{bind_devices, release};
use super::{BIND_FAILED_CONDITION, BOUND_CONDITION, BindFailure};
use crate::api_port::ApiPort;
use crate::claim::{ClaimRef, StatusWrite};
use crate::prepare::ClaimPreparer;
/// This driver's results of `claim` that wait on [`BOUND_CONDITION`].
pub(super) fn waiting_results<'a>(
    claim: &'a ResourceClaim,
    driver: &str,
    pool: &str,
) -> Vec<&'a DeviceRequestAllocationResult> {
    claim
        .status
        .iter()
        .flat_map(|s| s.allocation.iter())
        .flat_map(|a| a.devices.iter())
        .flat_map(|d| d.results.iter().flatten())
        .filter(|r| r.driver == driver && r.pool == pool)
        .filter(|r| {
            r.binding_conditions
                .iter()
                .flatten()
                .any(|c| c == BOUND_CONDITION)
        })
        .collect()
}

/// Whether the claim's status already decides `result` (the condition or
/// the failure condition is `True`).
pub(super) fn decided(claim: &ResourceClaim, result: &DeviceRequestAllocationResult) -> bool {
    claim
        .status
        .iter()
        .flat_map(|s| s.devices.iter().flatten())
        .filter(|d| d.driver == result.driver && d.pool == result.pool && d.device == result.device)
        .flat_map(|d| d.conditions.iter().flatten())
        .any(|c| {
            (c.type_ == BOUND_CONDITION || c.type_ == BIND_FAILED_CONDITION) && c.status == "True"
        })
}

/// The status entries that tell the scheduler how binding `results` went.
pub(super) fn condition_statuses(
    results: &[&DeviceRequestAllocationResult],
    outcome: &Result<String, BindFailure>,
) -> Vec<AllocatedDeviceStatus> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let condition = |type_: &str, status: &str, reason: &str, message: &str| Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        last_transition_time: now.clone(),
        observed_generation: None,
    };
    results
        .iter()
        .map(|result| AllocatedDeviceStatus {
            driver: result.driver.clone(),
            pool: result.pool.clone(),
            device: result.device.clone(),
            share_id: result.share_id.clone(),
            conditions: Some(match outcome {
                Ok(message) => vec![condition(BOUND_CONDITION, "True", "Bound", message)],
                Err(failure) => {
                    let message = failure.to_string();
                    vec![
                        condition(BOUND_CONDITION, "False", failure.reason(), &message),
                        condition(BIND_FAILED_CONDITION, "True", failure.reason(), &message),
                    ]
                }
            }),
            data: None,
            network_data: None,
        })
        .collect()
}

/// Binds the groups of the devices `results` name for `claim`; answers
/// what was done, for the condition's message.
async fn bind_results(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    results: &[&DeviceRequestAllocationResult],
) -> Result<String, BindFailure> {
    let started = Instant::now();
    let mut ids = Vec::new();
    for result in results {
        let id = wdp_k8s_naming::device_id(&result.device).map_err(|e| {
            BindFailure::Device(format!(
                "device {:?} is not a device of this driver: {e}",
                result.device
            ))
        })?;
        ids.push(id);
    }
    let bound = bind_devices(preparer, claim, &ids).await?;
    let names: Vec<&str> = bound.iter().map(|(_, g)| g.group.as_str()).collect();
    Ok(format!(
        "IOMMU group(s) {} bound in {} ms",
        names.join(", "),
        started.elapsed().as_millis()
    ))
}

/// At a driver's start: undoes the binds a kill cut short, then follows
/// the cluster's claims (see [`follow_claims`]).
pub(crate) async fn recover_then_follow(
    preparer: Arc<ClaimPreparer>,
    api: Arc<dyn ApiPort>,
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    if let Some(binds) = preparer.passthrough() {
        binds.recover().await;
    }
    follow_claims(preparer, api, leading, stop).await;
}

/// Follows the cluster's claims for `preparer`'s driver while `leading`
/// and its resource binds on demand, until `stop` (see the module docs).
pub(crate) async fn follow_claims(
    preparer: Arc<ClaimPreparer>,
    api: Arc<dyn ApiPort>,
    mut leading: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let mut devices = preparer.resource().subscribe();
    loop {
        let wanted =
            *leading.borrow_and_update() && preparer.resource().spec().config.passthrough.is_some();
        if wanted {
            tracing::info!(driver = %preparer.driver(), "following ResourceClaims to bind passthrough devices on allocation");
            let mut claims = api.watch_claims();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = leading.changed() => if changed.is_err() || !*leading.borrow() { break },
                    changed = devices.changed() => {
                        if changed.is_err() { return }
                        if preparer.resource().spec().config.passthrough.is_none() { break }
                    }
                    event = claims.next() => match event {
                        Some(event) => on_claim_event(&preparer, api.as_ref(), event).await,
                        None => break,
                    },
                }
            }
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = leading.changed() => if changed.is_err() { stop.cancelled().await; return },
            changed = devices.changed() => if changed.is_err() { stop.cancelled().await; return },
        }
    }
}

/// One event of the claim watch.
async fn on_claim_event(preparer: &ClaimPreparer, api: &dyn ApiPort, event: ClaimEvent) {
    match event {
        ClaimEvent::Changed(claim) => on_claim(preparer, api, &claim).await,
        ClaimEvent::Deleted(claim) => {
            if let Some(uid) = claim.metadata.uid.as_deref() {
                release_unprepared(preparer, uid).await;
            }
        }
        ClaimEvent::Listed(existing) => {
            let Some(binds) = preparer.passthrough() else {
                return;
            };
            let held: BTreeSet<String> = binds.records().into_keys().collect();
            for uid in held.difference(&existing) {
                release_unprepared(preparer, uid).await;
            }
        }
    }
}

/// A claim added or changed: binds what waits on this driver, or binds
/// back what it no longer holds.
async fn on_claim(preparer: &ClaimPreparer, api: &dyn ApiPort, claim: &ResourceClaim) {
    let Some(uid) = claim.metadata.uid.clone() else {
        return;
    };
    let results = waiting_results(claim, preparer.driver(), preparer.pool());
    if results.is_empty() || claim.metadata.deletion_timestamp.is_some() {
        release_unprepared(preparer, &uid).await;
        return;
    }
    if results.iter().all(|r| decided(claim, r)) {
        return;
    }
    let reference = ClaimRef {
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        name: claim.metadata.name.clone().unwrap_or_default(),
        uid,
    };
    let outcome = bind_results(preparer, &reference, &results).await;
    match &outcome {
        Ok(message) => {
            tracing::info!(driver = %preparer.driver(), claim = %reference, "{message}");
        }
        Err(error) => {
            tracing::warn!(driver = %preparer.driver(), claim = %reference, %error, "passthrough bind refused or failed: the claim's binding fails and the scheduler tries again");
        }
    }
    let write = StatusWrite {
        claim: reference.clone(),
        driver: preparer.driver().to_owned(),
        pool: preparer.pool().to_owned(),
        statuses: condition_statuses(&results, &outcome),
    };
    if let Err(error) = api.write_status(write).await {
        tracing::warn!(driver = %preparer.driver(), claim = %reference, %error, "cannot write the claim's binding condition; the scheduler waits until its binding timeout");
    }
}

/// Binds back the groups of claim `uid` unless it is prepared (then its
/// unprepare does).
async fn release_unprepared(preparer: &ClaimPreparer, uid: &str) {
    // Every claim of the cluster comes through here: most hold no group.
    let holds = preparer
        .passthrough()
        .is_some_and(|binds| binds.records().contains_key(uid));
    if !holds || preparer.is_prepared(uid).await {
        return;
    }
    if let Err(error) = release(preparer, uid).await {
        tracing::error!(driver = %preparer.driver(), claim = uid, %error, "cannot bind the IOMMU groups of a claim that is gone back to their drivers");
    }
}
