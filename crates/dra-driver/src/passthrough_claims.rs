//! The claim watch of passthrough bound on demand: while this instance
//! publishes the slices, every claim added, changed, deleted or listed is
//! looked at; one whose results of this driver and pool wait on
//! [`BOUND_CONDITION`] gets its devices' groups bound and the outcome
//! written into its `status.devices` (the condition, or the failure
//! condition with the reason); one gone or deallocated before it was
//! prepared gets its groups bound back. Claims are handled side by side,
//! each claim's events in the order they came.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tokio::sync::watch;
use tokio::task::JoinHandle;
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
/// Each claim's events are handled in order, different claims' side by
/// side ([`ClaimLanes`]); at `stop` the work in flight is finished first.
pub(crate) async fn follow_claims(
    preparer: Arc<ClaimPreparer>,
    api: Arc<dyn ApiPort>,
    mut leading: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let mut devices = preparer.resource().subscribe();
    let mut lanes = ClaimLanes::default();
    loop {
        let wanted =
            *leading.borrow_and_update() && preparer.resource().spec().config.passthrough.is_some();
        if wanted {
            tracing::info!(driver = %preparer.driver(), "following ResourceClaims to bind passthrough devices on allocation");
            let mut claims = api.watch_claims();
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return lanes.finish().await,
                    changed = leading.changed() => if changed.is_err() || !*leading.borrow() { break },
                    changed = devices.changed() => {
                        if changed.is_err() { return lanes.finish().await }
                        if preparer.resource().spec().config.passthrough.is_none() { break }
                    }
                    event = claims.next() => match event {
                        Some(event) => on_claim_event(&preparer, &api, &mut lanes, event),
                        None => break,
                    },
                }
            }
            continue;
        }
        tokio::select! {
            _ = stop.cancelled() => return lanes.finish().await,
            changed = leading.changed() => if changed.is_err() { stop.cancelled().await; return lanes.finish().await },
            changed = devices.changed() => if changed.is_err() { stop.cancelled().await; return lanes.finish().await },
        }
    }
}

/// The claim watch's work in flight, one lane per claim (by uid): a
/// claim's events are handled in the order they came, after the work
/// still running for that claim, and different claims' side by side, so
/// that virtual machines scheduled together do not wait for each other's
/// binds (seconds each on real drivers).
#[derive(Default)]
struct ClaimLanes {
    lanes: HashMap<String, JoinHandle<()>>,
}

impl ClaimLanes {
    /// Runs `work` for claim `uid` once the claim's earlier work ended.
    fn run(&mut self, uid: String, work: impl Future<Output = ()> + Send + 'static) {
        self.lanes.retain(|_, lane| !lane.is_finished());
        let earlier = self.lanes.remove(&uid);
        let lane = tokio::spawn(async move {
            if let Some(earlier) = earlier {
                // A lane that panicked has ended; this claim's work goes on.
                let _ = earlier.await;
            }
            work.await;
        });
        self.lanes.insert(uid, lane);
    }

    /// Whether work for claim `uid` is still running.
    fn busy(&self, uid: &str) -> bool {
        self.lanes.get(uid).is_some_and(|lane| !lane.is_finished())
    }

    /// Waits for every lane's work to end.
    async fn finish(self) {
        for (_, lane) in self.lanes {
            let _ = lane.await;
        }
    }
}

/// One event of the claim watch, handed to its claim's lane; a claim
/// this driver neither waits on nor holds a group for, with nothing in
/// flight, is passed over here.
fn on_claim_event(
    preparer: &Arc<ClaimPreparer>,
    api: &Arc<dyn ApiPort>,
    lanes: &mut ClaimLanes,
    event: ClaimEvent,
) {
    let holds = |uid: &str| {
        preparer
            .passthrough()
            .is_some_and(|binds| binds.records().contains_key(uid))
    };
    match event {
        ClaimEvent::Changed(claim) => {
            let Some(uid) = claim.metadata.uid.clone() else {
                return;
            };
            let waits = !waiting_results(&claim, preparer.driver(), preparer.pool()).is_empty();
            if !waits && !holds(&uid) && !lanes.busy(&uid) {
                return;
            }
            let (preparer, api) = (Arc::clone(preparer), Arc::clone(api));
            lanes.run(uid, async move {
                on_claim(&preparer, api.as_ref(), &claim).await;
            });
        }
        ClaimEvent::Deleted(claim) => {
            if let Some(uid) = claim.metadata.uid {
                release_in_lane(preparer, lanes, uid);
            }
        }
        ClaimEvent::Listed(existing) => {
            let Some(binds) = preparer.passthrough() else {
                return;
            };
            let held: BTreeSet<String> = binds.records().into_keys().collect();
            for uid in held.difference(&existing) {
                release_in_lane(preparer, lanes, uid.clone());
            }
        }
    }
}

/// Queues [`release_unprepared`] for claim `uid` in its lane.
fn release_in_lane(preparer: &Arc<ClaimPreparer>, lanes: &mut ClaimLanes, uid: String) {
    let preparer = Arc::clone(preparer);
    let lane_uid = uid.clone();
    lanes.run(lane_uid, async move {
        release_unprepared(&preparer, &uid).await;
    });
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
