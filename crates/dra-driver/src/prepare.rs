//! The per-claim decisions of a DRA driver: `NodePrepareResources` and
//! `NodeUnprepareResources` for one claim, each answered on its own so a
//! bad claim never fails the others of the call.
//!
//! Prepare: a claim already in the checkpoint gets the recorded answer (no
//! guest runs again, unless its CDI spec is missing or damaged, as after a
//! reboot: then `recorded_spec` writes it again). Otherwise the claim read
//! from the API server must exist, carry the UID the kubelet named, not be
//! being deleted and be allocated; its results for this driver name devices
//! of this node's pool, each mapped back to a healthy device of the
//! resource's current set and not held by another claim (unless either has
//! admin access; the replicas of a shared device are devices of their own).
//! Then the `pre-start` guest (or the built-in node check) and the
//! `allocate` guest (or the built-in) run through the resource's usual call
//! path, the answer becomes the claim's CDI spec, and the checkpoint
//! records it all before the kubelet is answered.
//!
//! A result may name a partition (from the `dra-layout` guest): it maps to
//! its parent device, whose nodes the container gets, and is held
//! exclusively by its own ID; a device that allows multiple allocations
//! is never held exclusively. Before `pre-start`, the `dra-prepare` guest
//! creates what the devices need and reports their status; any later
//! failure calls `dra-unprepare` to undo it, and the statuses are written
//! into the claim's `status.devices` (this driver's and pool's entries
//! only) once the claim is recorded.
//!
//! Unprepare runs the `dra-unprepare` guest, removes the claim's device
//! statuses, its CDI spec and its checkpoint entry; a claim the checkpoint
//! does not know is already unprepared.
//!
//! Different claims prepare concurrently (the kubelet sends many pods'
//! claims at once after a node restart): the checkpoint is locked only to
//! pick and record devices, never across guest calls or the CDI write, and
//! records that arrive while it is being written are written together
//! next (group commit, in `shared_checkpoint`: one write and one sync for
//! many claims). The claim's CDI spec is renamed in without syncing: the
//! checkpoint is the durable record, the spec is derived from it.
//! Devices picked but not yet recorded are reserved in memory, so two
//! claims never take the same one; the same claim asked twice at once is
//! prepared once, the second call waiting for and answering with the
//! first's record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim,
};
use tokio::sync::Notify;
use wdp_policy::types::ClaimDevice;

use crate::allocation::{
    Picked, api_statuses, claim_info, named_devices, prepared_devices, recorded_claim_info,
};
use crate::api_port::{ApiPort, ApiPortError};
use crate::checkpoint::{Change, Checkpoint, PreparedClaim, PreparedDevice};
use crate::claim::{ClaimRef, StatusWrite};
use crate::claim_cdi;
use crate::device_metadata::{self, MetadataRecord, MetadataWriter};
use crate::error::ClaimAdmissionError;
use crate::in_flight::{self, InFlight};
use crate::passthrough::{self, PassthroughBinds};
use crate::recorded_spec;
use crate::shared_checkpoint::SharedCheckpoint;
use wdp_resource::DeviceSet;
use wdp_resource::HeldDevice;
use wdp_resource::{ContainerGrant, Resource};

/// Prepares and unprepares the claims of one DRA driver, serving one
/// resource.
#[derive(Debug)]
pub struct ClaimPreparer {
    driver: String,
    pool: String,
    resource: Arc<Resource>,
    cdi_dir: PathBuf,
    checkpoint: Arc<SharedCheckpoint>,
    in_flight: std::sync::Mutex<InFlight>,
    /// The resource left the configuration: only unprepare is served.
    draining: AtomicBool,
    /// Woken after every unprepare.
    unprepared: Notify,
    /// Writes device statuses into claims; `None`: statuses are not written.
    status_writer: Option<Arc<dyn ApiPort>>,
    /// Writes claims' device metadata files; `None`: none are written.
    metadata: Option<MetadataWriter>,
    /// Binds devices to the resource's `[passthrough]` driver; `None`:
    /// nothing is bound.
    passthrough: Option<Arc<PassthroughBinds>>,
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
        // What the claims recorded before a restart hold, from the start.
        resource.hold(&checkpoint.held_devices().collect::<Vec<_>>());
        Self {
            driver: driver.to_owned(),
            pool: pool.to_owned(),
            resource,
            checkpoint: Arc::new(SharedCheckpoint::new(driver, checkpoint)),
            cdi_dir,
            in_flight: std::sync::Mutex::new(InFlight::default()),
            draining: AtomicBool::new(false),
            unprepared: Notify::new(),
            status_writer: None,
            metadata: None,
            passthrough: None,
        }
    }

    /// The same preparer binding the devices of a resource with
    /// `[passthrough]` through `binds` (see `passthrough`).
    pub fn with_passthrough(mut self, binds: PassthroughBinds) -> Self {
        self.passthrough = Some(Arc::new(binds));
        self
    }

    /// Its binds, when it binds devices on demand.
    pub(crate) fn passthrough(&self) -> Option<&Arc<PassthroughBinds>> {
        self.passthrough.as_ref()
    }

    /// The pool it prepares devices of (the node's name).
    pub(crate) fn pool(&self) -> &str {
        &self.pool
    }

    /// The same preparer writing each claim's device metadata files
    /// through `writer` (see `device_metadata`). A metadata folder that
    /// cannot be used is logged here, naming it, and claims are still
    /// prepared (without their files until it can be).
    pub fn with_device_metadata(mut self, writer: MetadataWriter) -> Self {
        let on = self.resource.spec().config.device_metadata;
        if on && let Err(error) = writer.check() {
            tracing::error!(driver = %self.driver, %error, "device metadata files cannot be written: claims are prepared without them until the folder can be used");
        }
        self.metadata = Some(writer);
        self
    }

    /// The same preparer writing the `dra-prepare` guest's device statuses
    /// into claims through `api`.
    pub fn with_status_writer(mut self, api: Arc<dyn ApiPort>) -> Self {
        self.status_writer = Some(api);
        self
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
        self.checkpoint.read().await.claims().len()
    }

    /// The CDI specs in the CDI folder of claims the checkpoint does not
    /// record (a crash between writing the spec and recording the claim)
    /// and last modified more than `age` ago (a prepare in progress, here or
    /// in the other instance of a rolling update, is younger).
    pub async fn unrecorded_specs(&self, age: std::time::Duration) -> Vec<PathBuf> {
        let checkpoint = self.checkpoint.read().await;
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
        in_flight::one_at_a_time(&self.in_flight, uid, work).await
    }

    /// The driver's name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// The resource served.
    pub fn resource(&self) -> &Arc<Resource> {
        &self.resource
    }

    /// Whether claim `uid` is recorded as prepared.
    pub async fn is_prepared(&self, uid: &str) -> bool {
        self.checkpoint.read().await.get(uid).is_some()
    }

    /// Every prepared claim, by UID.
    pub async fn prepared_claims(&self) -> BTreeMap<String, PreparedClaim> {
        self.checkpoint.read().await.claims().clone()
    }

    /// Prepares `claim`, read from the API server as `read` (`Ok(None)`:
    /// not found). The error names the claim and why.
    pub async fn prepare(
        &self,
        claim: &ClaimRef,
        read: Result<Option<ResourceClaim>, ApiPortError>,
    ) -> Result<Vec<PreparedDevice>, String> {
        if self.is_prepared(&claim.uid).await {
            let recorded = self
                .one_at_a_time(&claim.uid, self.answer_recorded(claim))
                .await?;
            if let Some(done) = recorded {
                return Ok(done);
            }
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
        let prepared = self
            .one_at_a_time(&claim.uid, self.prepare_read(claim, &object, &results))
            .await;
        self.hold_now().await;
        prepared
    }

    /// Tells the resource what the recorded and in-flight claims hold, so
    /// that no layout moves a name of theirs to other hardware.
    fn hold(&self, checkpoint: &Checkpoint, in_flight: &InFlight) {
        let held: Vec<HeldDevice> = checkpoint
            .held_devices()
            .chain(in_flight.holding.values().flatten().cloned())
            .collect();
        self.resource.hold(&held);
    }

    /// [`hold`](Self::hold) with the checkpoint as it is now (after a
    /// prepare or unprepare ended, whichever way).
    async fn hold_now(&self) {
        let checkpoint = self.checkpoint.read().await;
        let in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.hold(&checkpoint, &in_flight);
    }

    /// The answer recorded for `claim`, after writing its CDI spec again
    /// if it is missing or damaged (see `recorded_spec`); `None`: not
    /// recorded (unprepared meanwhile). The caller holds the claim's gate.
    async fn answer_recorded(
        &self,
        claim: &ClaimRef,
    ) -> Result<Option<Vec<PreparedDevice>>, String> {
        let Some(record) = self.checkpoint.read().await.get(&claim.uid).cloned() else {
            return Ok(None);
        };
        // A node restarted since binds its groups to their driver again.
        passthrough::bind_recorded(self, claim, &record).await?;
        if let Some(file) = &record.cdi_spec
            && !recorded_spec::is_intact(file, &claim.uid, &record)
        {
            recorded_spec::rebuild(&self.resource, claim, &record, file).await?;
            tracing::warn!(driver = %self.driver, %claim, cdi_spec = %file.display(), "the claim's CDI spec was missing or damaged (the node restarted?): written again from the checkpoint");
        }
        if let Some(metadata) = &record.device_metadata {
            self.keep_metadata(claim, metadata, &record.devices)?;
        }
        Ok(Some(record.devices))
    }

    /// Prepares `claim` (`object` as read, `results` its allocation for
    /// this driver); the caller holds the claim's gate.
    async fn prepare_read(
        &self,
        claim: &ClaimRef,
        object: &ResourceClaim,
        results: &[DeviceRequestAllocationResult],
    ) -> Result<Vec<PreparedDevice>, String> {
        // Devices bound to the `[passthrough]` driver first: the device set
        // then shows their VFIO nodes, which the container gets.
        passthrough::bind_for_prepare(self, claim, results).await?;
        let set = self.resource.devices();
        let (picked, _reservation) = {
            let checkpoint = self.checkpoint.read().await;
            // An earlier call for the claim may have prepared it meanwhile.
            if let Some(done) = checkpoint.get(&claim.uid) {
                return Ok(done.devices.clone());
            }
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let picked = self.pick_devices(claim, results, &set, &checkpoint, &in_flight)?;
            let reservation =
                in_flight::reserve(&self.in_flight, &mut in_flight, &claim.uid, &picked);
            // Their names are held from now on (see `wdp_resource::held`).
            self.hold(&checkpoint, &in_flight);
            (picked, reservation)
        };
        // The advertised devices the container gets (a partition's parent).
        let mut ids: Vec<String> = Vec::new();
        for pick in &picked {
            if !ids.iter().any(|id| id == pick.device.id()) {
                ids.push(pick.device.id().to_owned());
            }
        }
        let claim_devices: Vec<ClaimDevice> = picked
            .iter()
            .map(|p| p.claim_device(&self.driver))
            .collect();
        let info = Arc::new(claim_info(
            claim,
            &self.driver,
            object,
            results,
            claim_devices,
        ));
        let pod_claim = device_metadata::pod_claim_name(object);
        let done = self
            .call_and_record(claim, &info, (&ids, pod_claim), &picked, &set)
            .await;
        let (devices, file, api_statuses) = match done {
            Ok(done) => done,
            Err(error) => {
                // The one unwind: whatever step failed, `dra-prepare`'s
                // work is undone (the spec, if written, is gone already).
                self.unwind(claim, &info).await;
                return Err(error);
            }
        };
        if !api_statuses.is_empty() {
            self.write_statuses(claim, api_statuses).await;
        }
        tracing::info!(driver = %self.driver, %claim, devices = ?ids, cdi_spec = %file.display(), "claim prepared");
        Ok(devices)
    }

    /// The guests' part of a prepare and its record: `dra-prepare` (for
    /// `info`'s devices), `pre-start` and `allocate` for `ids` (the
    /// advertised devices of the claim's `picked` ones, of `set`), the
    /// claim's device metadata files (`pod_claim`: its pod's name when
    /// made from a template) and CDI spec written, the claim recorded in
    /// the checkpoint. Answers the prepared devices, the spec's path and the
    /// device statuses to write. On an error nothing is left of the files or
    /// the record; the caller undoes `dra-prepare`'s work.
    async fn call_and_record(
        &self,
        claim: &ClaimRef,
        info: &Arc<wdp_policy::ClaimInfo>,
        (ids, pod_claim): (&[String], Option<&str>),
        picked: &[Picked<'_>],
        set: &DeviceSet,
    ) -> Result<(Vec<PreparedDevice>, PathBuf, Vec<AllocatedDeviceStatus>), String> {
        let (statuses, answer) = wdp_resource::with_claim(Arc::clone(info), async {
            let statuses = self.resource.dra_prepare(&info.devices).await?;
            self.resource.pre_start(ids).await?;
            let answer = self
                .resource
                .allocate(ids)
                .await
                .map_err(ClaimAdmissionError::Allocate)?;
            Ok::<_, ClaimAdmissionError>((statuses, answer))
        })
        .await
        .map_err(|error| format!("claim {claim}: {error}"))?;
        let spec = self.resource.spec();
        let metadata = self.write_metadata(claim, pod_claim, picked, set);
        let file = self
            .write_claim_spec(claim, picked, set, &answer, metadata.as_ref())
            .inspect_err(|_| self.remove_metadata(claim, metadata.as_ref()))?;
        let mut devices = prepared_devices(
            &self.driver,
            &spec.config.resource,
            &claim.uid,
            picked,
            answer.cdi_devices.clone(),
        );
        if let Some(metadata) = &metadata {
            device_metadata::attach_cdi_ids(&mut devices, &spec.config.resource, metadata);
        }
        let api_statuses = api_statuses(&self.driver, picked, &statuses);
        let record = PreparedClaim {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            devices: devices.clone(),
            cdi_spec: Some(file.clone()),
            status_written: !api_statuses.is_empty() && self.status_writer.is_some(),
            device_metadata: metadata.clone().map(Box::new),
            passthrough: passthrough::bound_groups(self, &claim.uid),
            unknown: Default::default(),
        };
        if let Err(error) = self
            .checkpoint
            .record(Change::Insert(claim.uid.clone(), record))
            .await
        {
            let _ = claim_cdi::remove_spec(&file);
            self.remove_metadata(claim, metadata.as_ref());
            return Err(format!("claim {claim}: {error}"));
        }
        Ok((devices, file, api_statuses))
    }

    /// Writes the claim's CDI spec: each picked device (a partition under
    /// its own name, on its parent's nodes) with what the allocate
    /// `answer` gives, and the mounts of its `metadata` files; returns its
    /// path.
    fn write_claim_spec(
        &self,
        claim: &ClaimRef,
        picked: &[Picked<'_>],
        set: &DeviceSet,
        answer: &ContainerGrant,
        metadata: Option<&MetadataRecord>,
    ) -> Result<PathBuf, String> {
        let spec = self.resource.spec();
        let named = named_devices(picked);
        let mut cdi_spec =
            claim_cdi::claim_spec(&spec.config, &claim.uid, &named, set.companions(), answer);
        claim_cdi::add_metadata_mounts(&mut cdi_spec, metadata);
        let file = claim_cdi::spec_file(&self.cdi_dir, &spec.config.resource, &claim.uid);
        wdp_cdi::write_file_unsynced(&file, &cdi_spec).map_err(|error| {
            format!(
                "claim {claim}: cannot write the CDI spec {}: {error}",
                file.display()
            )
        })?;
        Ok(file)
    }

    /// Undoes the `dra-prepare` guest's work for a claim whose prepare
    /// failed after it ran (or while it ran); a failure is logged, the
    /// claim fails either way.
    async fn unwind(&self, claim: &ClaimRef, info: &Arc<wdp_policy::ClaimInfo>) {
        let undone = wdp_resource::with_claim(Arc::clone(info), async {
            self.resource.dra_unprepare(&info.devices).await
        })
        .await;
        if let Err(error) = undone {
            tracing::error!(driver = %self.driver, %claim, %error, "the failed prepare could not be undone: dra-unprepare failed");
        }
    }

    /// Writes the device statuses of `claim` (this driver's and pool's
    /// entries; none removes them). A failure is logged, never fails the
    /// claim: the status informs, the devices work without it.
    async fn write_statuses(&self, claim: &ClaimRef, statuses: Vec<AllocatedDeviceStatus>) {
        let Some(api) = &self.status_writer else {
            return;
        };
        let removing = statuses.is_empty();
        let write = StatusWrite {
            claim: claim.clone(),
            driver: self.driver.clone(),
            pool: self.pool.clone(),
            statuses,
        };
        match api.write_status(write).await {
            Ok(()) if removing => {
                tracing::debug!(driver = %self.driver, %claim, "device statuses removed from the claim");
            }
            Ok(()) => {
                tracing::debug!(driver = %self.driver, %claim, "device statuses written into the claim")
            }
            Err(error) => {
                tracing::warn!(driver = %self.driver, %claim, %error, removing, "cannot write the claim's device statuses")
            }
        }
    }

    /// Unprepares claim `uid`: its CDI spec and checkpoint entry go. An
    /// unknown claim is already unprepared.
    pub async fn unprepare(&self, claim: &ClaimRef) -> Result<(), String> {
        let result = self
            .one_at_a_time(&claim.uid, self.unprepare_now(claim))
            .await;
        self.hold_now().await;
        self.unprepared.notify_waiters();
        result
    }

    /// Unprepares `claim`; the caller holds the claim's gate.
    async fn unprepare_now(&self, claim: &ClaimRef) -> Result<(), String> {
        let checkpoint = self.checkpoint.read().await;
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
            passthrough::release(self, &claim.uid)
                .await
                .map_err(|error| format!("claim {claim}: {error}"))?;
            return self.remove_unrecorded_metadata(claim);
        };
        let info = Arc::new(recorded_claim_info(claim, &record));
        wdp_resource::with_claim(
            Arc::clone(&info),
            self.resource.dra_unprepare(&info.devices),
        )
        .await
        .map_err(|error| format!("claim {claim}: {error}"))?;
        if record.status_written {
            self.write_statuses(claim, Vec::new()).await;
        }
        if let Some(file) = &record.cdi_spec {
            claim_cdi::remove_spec(file).map_err(|e| {
                format!(
                    "claim {claim}: cannot remove the CDI spec {}: {e}",
                    file.display()
                )
            })?;
        }
        if let Some(metadata) = &record.device_metadata {
            device_metadata::remove(metadata, &claim.uid)
                .map_err(|error| format!("claim {claim}: {error}"))?;
        }
        // Its groups go back to their drivers before the record goes: a
        // failure here is retried by the kubelet's next unprepare.
        passthrough::release_recorded(self, &claim.uid, &record.passthrough)
            .await
            .map_err(|error| format!("claim {claim}: {error}"))?;
        self.checkpoint
            .record(Change::Remove(claim.uid.clone()))
            .await
            .map_err(|e| format!("claim {claim}: {e}"))?;
        tracing::info!(driver = %self.driver, %claim, "claim unprepared");
        Ok(())
    }
}

#[path = "prepare_metadata.rs"]
mod metadata;
#[path = "prepare_pick.rs"]
mod pick;
