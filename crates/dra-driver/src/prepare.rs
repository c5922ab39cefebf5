//! The per-claim decisions of a DRA driver: `NodePrepareResources` and
//! `NodeUnprepareResources` for one claim, each answered on its own so a
//! bad claim never fails the others of the call.
//!
//! Prepare: a claim already in the checkpoint gets the recorded answer
//! (no guest runs again). Otherwise the claim read from the API server
//! must exist, carry the UID the kubelet named, not be being deleted and
//! be allocated; its results for this driver name devices of this node's
//! pool, each mapped back to a healthy device of the resource's current
//! set and not held by another claim (unless either has admin access; the
//! replicas of a shared device are devices of their own). Then the
//! `pre-start` guest (or the built-in node check) and the `allocate` guest
//! (or the built-in) run through the resource's usual call path, the
//! answer becomes the claim's CDI spec, and the checkpoint records it all
//! before the kubelet is answered.
//!
//! Unprepare removes the claim's CDI spec and its checkpoint entry; a claim
//! the checkpoint does not know is already unprepared.
//!
//! Different claims prepare concurrently (the kubelet sends many pods'
//! claims at once after a node restart): the checkpoint is locked only to
//! pick and record devices, never across guest calls or the CDI write, and
//! records that arrive while it is being written are written together
//! next (group commit: one write and sync for many claims).
//! Devices picked but not yet recorded are reserved in memory, so two
//! claims never take the same one; the same claim asked twice at once is
//! prepared once, the second call waiting for and answering with the
//! first's record.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use tokio::sync::{Mutex, Notify, oneshot};

use crate::checkpoint::{Change, Checkpoint, PreparedClaim, PreparedDevice};
use crate::claim_cdi;
use wdp_resource::Resource;
use wdp_resource::device_set::{AdvertisedDevice, DeviceSet};

/// A claim as the kubelet names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

impl std::fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

/// What the guests see of `object` through the `claim` import: the
/// requests of this driver's results, and the parameters of every opaque
/// configuration for this driver that applies to one of them (a
/// configuration naming no requests applies to all), in allocation order.
pub fn claim_info(
    claim: &ClaimRef,
    driver: &str,
    object: &ResourceClaim,
    results: &[DeviceRequestAllocationResult],
) -> wdp_policy::ClaimInfo {
    let mut requests: Vec<String> = Vec::new();
    for result in results {
        if !requests.contains(&result.request) {
            requests.push(result.request.clone());
        }
    }
    let configs = object
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .filter(|config| {
            config
                .requests
                .as_ref()
                .is_none_or(|named| named.is_empty() || named.iter().any(|r| requests.contains(r)))
        })
        .filter_map(|config| config.opaque.as_ref())
        .filter(|opaque| opaque.driver == driver)
        .map(|opaque| serde_json::to_string(&opaque.parameters.0).unwrap_or_default())
        .collect();
    wdp_policy::ClaimInfo {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        uid: claim.uid.clone(),
        requests,
        configs,
    }
}

/// Prepares and unprepares the claims of one DRA driver, serving one
/// resource.
#[derive(Debug)]
pub struct ClaimPreparer {
    driver: String,
    pool: String,
    resource: Arc<Resource>,
    cdi_dir: PathBuf,
    checkpoint: Mutex<Checkpoint>,
    in_flight: std::sync::Mutex<InFlight>,
    /// The resource left the configuration: only unprepare is served.
    draining: AtomicBool,
    /// Woken after every unprepare.
    unprepared: Notify,
    /// Checkpoint changes waiting to be written, each with whoever waits
    /// for the outcome: whoever takes the checkpoint next writes them all
    /// at once (group commit), so claims prepared together share one write.
    pending: std::sync::Mutex<Vec<QueuedChange>>,
}

/// A checkpoint change waiting to be written, and who waits for it.
type QueuedChange = (Change, oneshot::Sender<Result<(), String>>);

/// Claims being prepared or unprepared right now, and the devices picked
/// for a claim that the checkpoint does not record yet.
#[derive(Debug, Default)]
struct InFlight {
    /// One gate per claim UID in progress: calls for the same claim run
    /// one after the other.
    claims: HashMap<String, Arc<Mutex<()>>>,
    /// Device ID → the UID of the claim that picked it.
    reserved: HashMap<String, String>,
}

/// Devices reserved for a claim until it is recorded or fails; released
/// when dropped, whichever way the prepare ends (a cancelled call
/// included).
struct Reservation<'a> {
    in_flight: &'a std::sync::Mutex<InFlight>,
    ids: Vec<String>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for id in &self.ids {
            in_flight.reserved.remove(id);
        }
    }
}

impl ClaimPreparer {
    /// A preparer for `driver` publishing pool `pool`, serving `resource`,
    /// writing CDI specs into `cdi_dir`, recording in `checkpoint`.
    pub fn new(
        driver: &str,
        pool: &str,
        resource: Arc<Resource>,
        cdi_dir: PathBuf,
        checkpoint: Checkpoint,
    ) -> Self {
        Self {
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            resource,
            cdi_dir,
            checkpoint: Mutex::new(checkpoint),
            in_flight: std::sync::Mutex::new(InFlight::default()),
            draining: AtomicBool::new(false),
            unprepared: Notify::new(),
            pending: std::sync::Mutex::default(),
        }
    }

    /// From now on prepares are refused (the resource left the
    /// configuration); unprepares go on until no claim is left.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Waits until an unprepare happens (or a moment passes: the other
    /// instance of a rolling update may unprepare too), then answers how
    /// many claims are still prepared.
    pub async fn wait_for_unprepare(&self, at_most: std::time::Duration) -> usize {
        let _ = tokio::time::timeout(at_most, self.unprepared.notified()).await;
        self.checkpoint().await.claims().len()
    }

    /// The CDI specs in the CDI folder of claims the checkpoint does not
    /// record (a crash between writing the spec and recording the claim)
    /// and last modified more than `age` ago (a prepare in progress, here or
    /// in the other instance of a rolling update, is younger).
    pub async fn unrecorded_specs(&self, age: std::time::Duration) -> Vec<PathBuf> {
        let checkpoint = self.checkpoint().await;
        let resource = self.resource.spec().config.resource.clone();
        claim_cdi::spec_files(&self.cdi_dir, &resource)
            .into_iter()
            .filter(|(uid, _)| checkpoint.get(uid).is_none())
            .filter(|(_, path)| {
                std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > age))
            })
            .map(|(_, path)| path)
            .collect()
    }

    /// Runs `work` for claim `uid` after every earlier call for the same
    /// claim finished.
    async fn one_at_a_time<T>(&self, uid: &str, work: impl Future<Output = T>) -> T {
        let gate = {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            Arc::clone(in_flight.claims.entry(uid.to_owned()).or_default())
        };
        let result = {
            let _turn = gate.lock().await;
            work.await
        };
        let mut in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Clones are only taken under this lock: two means the map's and
        // ours, so no other call waits and the gate can go.
        if Arc::strong_count(&gate) == 2 {
            in_flight.claims.remove(uid);
        }
        result
    }

    /// The driver's name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The resource served.
    pub fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }

    /// The checkpoint, re-read first if another instance of the host
    /// replaced it (a rolling update runs two).
    async fn checkpoint(&self) -> tokio::sync::MutexGuard<'_, Checkpoint> {
        let mut checkpoint = self.checkpoint.lock().await;
        if let Err(error) = checkpoint.refresh() {
            tracing::error!(driver = %self.driver, %error, "serving with the prepared claims last read");
        }
        checkpoint
    }

    /// Writes `change` into the checkpoint, together with every change
    /// queued meanwhile by other calls (see `pending`).
    async fn record(&self, change: Change) -> Result<(), String> {
        let (done, mut outcome) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((change, done));
        let mut checkpoint = self.checkpoint.lock().await;
        if let Ok(result) = outcome.try_recv() {
            // Written by the call that held the checkpoint before.
            return result;
        }
        let batch =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
        if !batch.is_empty() {
            let (changes, waiting): (Vec<Change>, Vec<_>) = batch.into_iter().unzip();
            let result = checkpoint
                .commit(changes)
                .map_err(|error| error.to_string());
            drop(checkpoint);
            for waiter in waiting {
                let _ = waiter.send(result.clone());
            }
        }
        outcome
            .await
            .unwrap_or_else(|_| Err("the checkpoint write was abandoned".to_owned()))
    }

    /// The answer recorded for `uid`, if it was prepared.
    pub async fn prepared(&self, uid: &str) -> Option<Vec<PreparedDevice>> {
        let checkpoint = self.checkpoint().await;
        checkpoint.get(uid).map(|c| c.devices.clone())
    }

    /// Every prepared claim, by UID.
    pub async fn prepared_claims(&self) -> BTreeMap<String, PreparedClaim> {
        self.checkpoint().await.claims().clone()
    }

    /// Prepares `claim`, read from the API server as `read` (`Ok(None)`:
    /// not found). The error names the claim and why.
    pub async fn prepare(
        &self,
        claim: &ClaimRef,
        read: Result<Option<ResourceClaim>, String>,
    ) -> Result<Vec<PreparedDevice>, String> {
        if let Some(done) = self.prepared(&claim.uid).await {
            return Ok(done);
        }
        if self.draining.load(Ordering::SeqCst) {
            return Err(format!(
                "claim {claim}: DRA driver {} is leaving this node (its resource was removed from the configuration); it only unprepares the claims it prepared",
                self.driver
            ));
        }
        let object = read
            .map_err(|e| format!("claim {claim}: cannot read it from the API server: {e}"))?
            .ok_or_else(|| format!("claim {claim}: not found in the API server"))?;
        let results = self.results_for_us(claim, &object)?;
        if results.is_empty() {
            let mut drivers: Vec<&str> = object
                .status
                .iter()
                .flat_map(|s| s.allocation.iter())
                .flat_map(|a| a.devices.iter())
                .flat_map(|d| d.results.iter().flatten())
                .map(|r| r.driver.as_str())
                .collect();
            drivers.sort_unstable();
            drivers.dedup();
            return Err(format!(
                "claim {claim}: its allocation has no device of driver {} (it names drivers {drivers:?}); the kubelet asked the wrong driver",
                self.driver
            ));
        }
        self.one_at_a_time(&claim.uid, self.prepare_read(claim, &object, &results))
            .await
    }

    /// Prepares `claim` (`object` as read, `results` its allocation for
    /// this driver); the caller holds the claim's gate.
    async fn prepare_read(
        &self,
        claim: &ClaimRef,
        object: &ResourceClaim,
        results: &[DeviceRequestAllocationResult],
    ) -> Result<Vec<PreparedDevice>, String> {
        let set = self.resource.devices();
        let (picked, _reservation) = {
            let checkpoint = self.checkpoint().await;
            // An earlier call for the claim may have prepared it meanwhile.
            if let Some(done) = checkpoint.get(&claim.uid) {
                return Ok(done.devices.clone());
            }
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let picked = self.pick_devices(claim, results, &set, &checkpoint, &in_flight)?;
            let mut ids: Vec<String> = Vec::new();
            for (device, _, result) in &picked {
                if result.admin_access != Some(true) && !ids.iter().any(|id| id == device.id()) {
                    ids.push(device.id().to_owned());
                }
            }
            for id in &ids {
                in_flight.reserved.insert(id.clone(), claim.uid.clone());
            }
            let reservation = Reservation {
                in_flight: &self.in_flight,
                ids,
            };
            (picked, reservation)
        };
        let mut ids: Vec<String> = Vec::new();
        for (device, _, _) in &picked {
            if !ids.iter().any(|id| id == device.id()) {
                ids.push(device.id().to_owned());
            }
        }
        let info = Arc::new(claim_info(claim, &self.driver, object, results));
        let (pre_start, answer) = wdp_resource::guest_call::with_claim(info, async {
            let pre_start = self.resource.pre_start(&ids).await;
            let answer = match &pre_start {
                Ok(()) => Some(self.resource.allocate(&ids).await),
                Err(_) => None,
            };
            (pre_start, answer)
        })
        .await;
        pre_start.map_err(|status| format!("claim {claim}: {}", status.message()))?;
        let answer = answer
            .unwrap_or_else(|| Err(tonic::Status::internal("allocate did not run")))
            .map_err(|status| format!("claim {claim}: allocate: {}", status.message()))?;
        let spec = self.resource.spec();
        let mut named: Vec<(&AdvertisedDevice, String)> = Vec::new();
        for (device, name, _) in &picked {
            if !named.iter().any(|(_, n)| n == name) {
                named.push((device, name.clone()));
            }
        }
        let cdi_spec =
            claim_cdi::claim_spec(&spec.config, &claim.uid, &named, set.companions(), &answer);
        let file = claim_cdi::spec_file(&self.cdi_dir, &spec.config.resource, &claim.uid);
        wdp_resource::cdi::write_file(&file, &cdi_spec).map_err(|e| {
            format!(
                "claim {claim}: cannot write the CDI spec {}: {e}",
                file.display()
            )
        })?;
        // CDI devices the allocate answer names itself go with the first
        // device.
        let mut extra: Vec<String> = answer.cdi_devices.iter().map(|d| d.name.clone()).collect();
        let devices: Vec<PreparedDevice> = picked
            .iter()
            .map(|(device, name, result)| {
                let mut cdi_device_ids = vec![format!(
                    "{}={}",
                    spec.config.resource,
                    claim_cdi::cdi_device_name(&claim.uid, name)
                )];
                cdi_device_ids.append(&mut extra);
                PreparedDevice {
                    request_names: vec![result.request.clone()],
                    pool_name: result.pool.clone(),
                    device_name: result.device.clone(),
                    device_id: device.id().to_owned(),
                    cdi_device_ids,
                    share_id: result.share_id.clone(),
                    admin_access: result.admin_access == Some(true),
                }
            })
            .collect();
        let record = PreparedClaim {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            devices: devices.clone(),
            cdi_spec: Some(file.clone()),
        };
        if let Err(error) = self.record(Change::Insert(claim.uid.clone(), record)).await {
            let _ = claim_cdi::remove_spec(&file);
            return Err(format!("claim {claim}: {error}"));
        }
        tracing::info!(driver = %self.driver, %claim, devices = ?ids, cdi_spec = %file.display(), "claim prepared");
        Ok(devices)
    }

    /// The allocation results of `object` for this driver, after checking
    /// the claim is the one named, alive and allocated.
    fn results_for_us(
        &self,
        claim: &ClaimRef,
        object: &ResourceClaim,
    ) -> Result<Vec<DeviceRequestAllocationResult>, String> {
        let uid = object.metadata.uid.as_deref().unwrap_or_default();
        if uid != claim.uid {
            return Err(format!(
                "claim {claim}: the API server's claim of that name has UID {uid:?}; the claim was deleted and re-created"
            ));
        }
        if object.metadata.deletion_timestamp.is_some() {
            return Err(format!("claim {claim}: it is being deleted"));
        }
        let Some(allocation) = object.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
            return Err(format!("claim {claim}: it is not allocated"));
        };
        Ok(allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .filter(|r| r.driver == self.driver)
            .cloned()
            .collect())
    }

    /// Maps each result to a device of `set`: this node's pool, a known and
    /// healthy device, not held by another claim.
    fn pick_devices<'a>(
        &self,
        claim: &ClaimRef,
        results: &'a [DeviceRequestAllocationResult],
        set: &'a DeviceSet,
        checkpoint: &Checkpoint,
        in_flight: &InFlight,
    ) -> Result<
        Vec<(
            &'a AdvertisedDevice,
            String,
            &'a DeviceRequestAllocationResult,
        )>,
        String,
    > {
        let mut seen = BTreeSet::new();
        results
            .iter()
            .map(|result| {
                if result.pool != self.pool {
                    return Err(format!(
                        "claim {claim}: request {:?} was allocated device {:?} of pool {:?}, but this node publishes pool {:?}",
                        result.request, result.device, result.pool, self.pool
                    ));
                }
                let device = wdp_dra_client::naming::device_id(&result.device)
                    .ok()
                    .and_then(|id| set.get(&id))
                    .ok_or_else(|| {
                        format!(
                            "claim {claim}: device {:?} (request {:?}) is not among the devices of {} on this node",
                            result.device,
                            result.request,
                            self.resource.name()
                        )
                    })?;
                if !device.healthy {
                    return Err(format!(
                        "claim {claim}: device {:?} (ID {:?}) is unhealthy: {}",
                        result.device,
                        device.id(),
                        device.reason
                    ));
                }
                let admin = result.admin_access == Some(true);
                if !admin {
                    let reserved = in_flight
                        .reserved
                        .get(device.id())
                        .filter(|holder| **holder != claim.uid)
                        .map(String::as_str);
                    if let Some(holder) =
                        checkpoint.holder_of(device.id(), &claim.uid).or(reserved)
                    {
                        return Err(format!(
                            "claim {claim}: device {:?} (ID {:?}) is already prepared for claim {holder}",
                            result.device,
                            device.id()
                        ));
                    }
                    if !seen.insert(device.id()) {
                        return Err(format!(
                            "claim {claim}: device {:?} is allocated twice in the claim",
                            result.device
                        ));
                    }
                }
                Ok((device, result.device.clone(), result))
            })
            .collect()
    }

    /// Unprepares claim `uid`: its CDI spec and checkpoint entry go. An
    /// unknown claim is already unprepared.
    pub async fn unprepare(&self, claim: &ClaimRef) -> Result<(), String> {
        let result = self
            .one_at_a_time(&claim.uid, self.unprepare_now(claim))
            .await;
        self.unprepared.notify_waiters();
        result
    }

    /// Unprepares `claim`; the caller holds the claim's gate.
    async fn unprepare_now(&self, claim: &ClaimRef) -> Result<(), String> {
        let checkpoint = self.checkpoint().await;
        let recorded = checkpoint.get(&claim.uid).cloned();
        let set_aside = checkpoint.set_aside().map(Path::to_owned);
        drop(checkpoint);
        let Some(record) = recorded else {
            // Not recorded: already unprepared, or recorded in a checkpoint
            // that could not be read. Its CDI spec, named by the claim, goes
            // either way; nothing else is guessed.
            let file = claim_cdi::spec_file(
                &self.cdi_dir,
                &self.resource.spec().config.resource,
                &claim.uid,
            );
            if file.exists() {
                claim_cdi::remove_spec(&file).map_err(|e| {
                    format!(
                        "claim {claim}: cannot remove the CDI spec {}: {e}",
                        file.display()
                    )
                })?;
                tracing::warn!(driver = %self.driver, %claim, cdi_spec = %file.display(), set_aside = ?set_aside, "claim unprepared that the checkpoint does not record: its CDI spec was removed");
            }
            return Ok(());
        };
        if let Some(file) = &record.cdi_spec {
            claim_cdi::remove_spec(file).map_err(|e| {
                format!(
                    "claim {claim}: cannot remove the CDI spec {}: {e}",
                    file.display()
                )
            })?;
        }
        self.record(Change::Remove(claim.uid.clone()))
            .await
            .map_err(|e| format!("claim {claim}: {e}"))?;
        tracing::info!(driver = %self.driver, %claim, "claim unprepared");
        Ok(())
    }
}
