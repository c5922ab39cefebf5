//! Passthrough bound on demand: a resource with `[passthrough]` publishes
//! its devices with a binding condition ([`BOUND_CONDITION`], and
//! [`BIND_FAILED_CONDITION`] as its failure condition, KEP-5007), so the
//! scheduler, having allocated one to a claim, waits before it binds the
//! pod. Meanwhile the device stays on its own driver, usable by containers.
//!
//! [`follow_claims`] watches the cluster's ResourceClaims while this
//! instance publishes. A claim allocated one of the driver's devices with
//! the condition gets the device's IOMMU group bound to the resource's
//! `bind-driver` (`wdp-passthrough` does the sysfs part, refusing what
//! must never move: the boot display, a network interface in use, a
//! mounted disk, a group another claim holds), after the `passthrough`
//! guest, when there is one, agreed; then the condition is written `True`
//! in the claim's `status.devices`, or the failure condition with the
//! reason, and the group is left on its drivers. A claim deleted or
//! deallocated before it was prepared gets its groups bound back.
//!
//! Prepare binds too, when the group is not bound yet (a claim allocated
//! while the watch was down, a node rebooted since), and hands the
//! container `/dev/vfio/<group>` and `/dev/vfio/vfio` instead of the
//! device's own nodes. Unprepare binds every function back to the driver
//! it had. The previous drivers are kept in the driver's bind journal, in
//! the checkpoint folder (`dra/<driver>.binds.json`), written before the
//! first sysfs write, so a host killed mid-bind undoes it at its next
//! start ([`PassthroughBinds::recover`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_config::ResourceConfig;
use wdp_dra_client::{BindingConditions, ClaimEvent};
use wdp_passthrough::{
    BindError, BindPlan, BindSettings, Binder, BoundGroup, FileJournal, GroupRecord, Journal,
    RecoveryOutcome,
};
use wdp_resource::{AdvertisedDevice, DeviceSet, Resource};

use crate::api_port::ApiPort;
use crate::checkpoint::PreparedClaim;
use crate::claim::{ClaimRef, StatusWrite};
use crate::metrics::{DraMetrics, PassthroughOutcome};
use crate::prepare::ClaimPreparer;

/// The binding condition of a passthrough device: `True` once its IOMMU
/// group is bound to the resource's `bind-driver`.
pub const BOUND_CONDITION: &str = "PassthroughBound";
/// Its failure condition: `True` when the host or a guest refused the bind
/// or it failed; the scheduler then gives the allocation up.
pub const BIND_FAILED_CONDITION: &str = "PassthroughBindFailed";

/// The `operation` label of a bind, and of a restore.
const BIND: &str = "bind";
const RESTORE: &str = "restore";

/// The fact holding a PCI function's address.
const PCI_ADDRESS_FACT: &str = "pci.address";

/// What a device of `config`'s resource publishes about binding: the
/// conditions when the resource binds on demand, else nothing.
pub fn binding_conditions(config: &ResourceConfig) -> Option<BindingConditions> {
    config.passthrough.as_ref().map(|_| BindingConditions {
        ready: vec![BOUND_CONDITION.to_owned()],
        failed: vec![BIND_FAILED_CONDITION.to_owned()],
    })
}

/// The bind journal of `driver` under `state_dir`, beside its checkpoint.
pub fn journal_path(state_dir: &Path, driver: &str) -> PathBuf {
    state_dir.join("dra").join(format!("{driver}.binds.json"))
}

/// The PCI functions of `device`: its `pci.address` fact, else those of
/// its candidates that are PCI addresses.
pub(crate) fn pci_functions(device: &AdvertisedDevice) -> Vec<String> {
    let fact = device
        .device
        .attributes
        .iter()
        .find(|(key, value)| key == PCI_ADDRESS_FACT && is_pci_address(value))
        .map(|(_, value)| value.clone());
    match fact {
        Some(address) => vec![address],
        None => device
            .candidates()
            .into_iter()
            .filter(|c| is_pci_address(c))
            .collect(),
    }
}

fn is_pci_address(text: &str) -> bool {
    crate::standard_attributes::is_pci_address(text)
}

/// What `check` prints of a resource that binds on demand: for each
/// device, the IOMMU group a claim would bind and its functions, or why
/// the host would refuse it now.
pub(crate) fn plan_lines(resource: &Resource, set: &DeviceSet) -> Vec<String> {
    let spec = resource.spec();
    let Some(passthrough) = &spec.config.passthrough else {
        return Vec::new();
    };
    let binder = Binder::new(resource.root().path(), BindSettings::default());
    let mut lines = Vec::new();
    for device in set.devices() {
        for function in pci_functions(device) {
            let line = match binder.plan(&function, &passthrough.bind_driver, &|_| None) {
                Ok(plan) => {
                    let moves: Vec<String> = plan
                        .moves()
                        .map(|f| {
                            format!(
                                "{} ({})",
                                f.address,
                                f.driver.as_deref().unwrap_or("no driver")
                            )
                        })
                        .collect();
                    format!(
                        "passthrough {}: IOMMU group {} binds to {} on allocation: {}",
                        device.id(),
                        plan.group,
                        plan.target,
                        moves.join(", ")
                    )
                }
                Err(refusal) => format!(
                    "passthrough {}: the host would refuse to bind it now: {refusal}",
                    device.id()
                ),
            };
            lines.push(line);
        }
    }
    lines
}

/// Why a claim's devices were not bound.
#[derive(Debug, thiserror::Error)]
pub enum BindFailure {
    /// The host refused, or the bind failed or timed out (the group is
    /// back on its drivers).
    #[error(transparent)]
    Host(#[from] BindError),
    /// The `passthrough` guest refused.
    #[error("{0}")]
    Guest(String),
    /// The bind journal cannot be used, so nothing is bound.
    #[error("the bind journal cannot be used: {0}")]
    Journal(String),
    /// The blocking task failed.
    #[error("the bind task failed: {0}")]
    Task(String),
    /// The claim names a device that cannot be bound.
    #[error("{0}")]
    Device(String),
}

impl BindFailure {
    /// The condition reason: one CamelCase word.
    fn reason(&self) -> &'static str {
        match self {
            Self::Host(BindError::Refused(_)) => "RefusedByHost",
            Self::Host(_) => "BindFailed",
            Self::Guest(_) => "RefusedByPolicy",
            Self::Journal(_) | Self::Task(_) | Self::Device(_) => "BindFailed",
        }
    }
}

/// The binds of one DRA driver: its [`Binder`] and bind journal.
#[derive(Debug)]
pub struct PassthroughBinds {
    driver: String,
    binder: Arc<Binder>,
    /// The journal, or why it cannot be read (then nothing is bound, and
    /// nothing restored, until it is mended and the host restarted).
    journal: Result<Arc<FileJournal>, String>,
    /// Counts binds and restores.
    metrics: Arc<DraMetrics>,
}

impl PassthroughBinds {
    /// The binds of `driver` reading hardware where `resource` does, with
    /// the journal under `state_dir`; one group's bind may take `deadline`;
    /// counted in `metrics`.
    pub fn open(
        driver: &str,
        resource: &Resource,
        state_dir: &Path,
        deadline: Duration,
        metrics: Arc<DraMetrics>,
    ) -> Self {
        let path = journal_path(state_dir, driver);
        let journal = FileJournal::open(&path).map(Arc::new).map_err(|error| {
            tracing::error!(driver, journal = %path.display(), %error, "cannot read the bind journal: no device is bound or bound back until it is mended (or removed, after binding the groups it names back by hand) and the host restarted");
            error.to_string()
        });
        Self {
            driver: driver.to_owned(),
            binder: Arc::new(Binder::new(
                resource.root().path(),
                BindSettings { deadline },
            )),
            journal,
            metrics,
        }
    }

    fn count(&self, operation: &str, outcome: PassthroughOutcome, started: Instant) {
        self.metrics
            .observe_passthrough(&self.driver, operation, outcome, started.elapsed());
    }

    fn journal(&self) -> Result<Arc<FileJournal>, BindFailure> {
        self.journal
            .as_ref()
            .map(Arc::clone)
            .map_err(|e| BindFailure::Journal(e.clone()))
    }

    /// The groups the journal holds, by claim UID.
    pub fn records(&self) -> BTreeMap<String, Vec<GroupRecord>> {
        let mut by_claim: BTreeMap<String, Vec<GroupRecord>> = BTreeMap::new();
        if let Ok(journal) = &self.journal {
            for record in journal.records().unwrap_or_default() {
                by_claim
                    .entry(record.claim_uid.clone())
                    .or_default()
                    .push(record);
            }
        }
        by_claim
    }

    /// At start: undoes the binds a kill cut short, and says which groups
    /// stay bound for their claims.
    pub async fn recover(&self) {
        let Ok(journal) = self.journal() else {
            return;
        };
        let binder = Arc::clone(&self.binder);
        let outcomes =
            match tokio::task::spawn_blocking(move || binder.recover(journal.as_ref())).await {
                Ok(outcomes) => outcomes,
                Err(error) => {
                    tracing::error!(driver = %self.driver, %error, "the bind recovery task failed");
                    return;
                }
            };
        for outcome in outcomes {
            match outcome {
                RecoveryOutcome::Undone { group, claim_uid } => {
                    tracing::warn!(driver = %self.driver, group, claim = claim_uid, "a bind cut short by the last stop was undone: the IOMMU group is back on its previous drivers");
                }
                RecoveryOutcome::Kept {
                    group,
                    claim_uid,
                    intact,
                } => {
                    tracing::info!(driver = %self.driver, group, claim = claim_uid, intact, "IOMMU group stays bound for its claim (bound again at its next prepare if not intact)");
                }
                other => {
                    tracing::error!(driver = %self.driver, outcome = ?other, "a bind recorded in the journal could not be undone");
                }
            }
        }
    }

    /// Binds the IOMMU groups of `functions` for `claim` (unless bound for
    /// it already), asking `resource`'s `passthrough` guest first;
    /// `others` names the claim holding a function. Answers the bound
    /// groups.
    pub async fn ensure_bound(
        &self,
        resource: &Resource,
        claim: &ClaimRef,
        device_id: &str,
        functions: &[String],
        others: &BTreeMap<String, String>,
    ) -> Result<Vec<BoundGroup>, BindFailure> {
        let Some(passthrough) = resource.spec().config.passthrough.clone() else {
            return Ok(Vec::new());
        };
        let journal = self.journal()?;
        let mut bound: Vec<BoundGroup> = Vec::new();
        for function in functions {
            let target = passthrough.bind_driver.clone();
            let binder = Arc::clone(&self.binder);
            let address = function.clone();
            let others = others.clone();
            let started = Instant::now();
            let plan =
                blocking(move || binder.plan(&address, &target, &|f: &str| others.get(f).cloned()))
                    .await?
                    .map_err(|refusal| {
                        self.count(BIND, PassthroughOutcome::Refused, started);
                        BindError::from(refusal)
                    })?;
            if bound.iter().any(|g| g.group == plan.group) {
                continue;
            }
            let held_here = journal
                .records()
                .unwrap_or_default()
                .into_iter()
                .any(|r| r.group == plan.group && r.claim_uid == claim.uid);
            if !held_here {
                resource
                    .may_bind(&bind_request(claim, device_id, &plan))
                    .await
                    .map_err(|e| {
                        self.count(BIND, PassthroughOutcome::Refused, started);
                        BindFailure::Guest(e.to_string())
                    })?;
            }
            let binder = Arc::clone(&self.binder);
            let journal = Arc::clone(&journal);
            let uid = claim.uid.clone();
            let bound_now = blocking(move || binder.bind(&uid, &plan, journal.as_ref())).await?;
            if !held_here {
                let outcome = match &bound_now {
                    Ok(_) => PassthroughOutcome::Success,
                    Err(BindError::Refused(_)) => PassthroughOutcome::Refused,
                    Err(_) => PassthroughOutcome::Failure,
                };
                self.count(BIND, outcome, started);
            }
            let group = bound_now?;
            tracing::info!(driver = %self.driver, %claim, device = device_id, group = %group.group, to = %passthrough.bind_driver, took_ms = started.elapsed().as_millis(), "IOMMU group bound");
            bound.push(group);
        }
        if !bound.is_empty() {
            resource.request_refresh();
        }
        Ok(bound)
    }

    /// Puts back into the journal the records of `recorded` (a prepared
    /// claim's checkpoint copy) whose groups it no longer holds (a journal
    /// removed or lost meanwhile), so that the drivers they had are not
    /// forgotten. A journal that cannot be used is left alone.
    pub fn reseed(&self, recorded: &[GroupRecord]) {
        let Ok(journal) = &self.journal else {
            return;
        };
        let held = journal.records().unwrap_or_default();
        for record in recorded {
            if held.iter().any(|r| r.group == record.group) {
                continue;
            }
            match journal.record(record) {
                Ok(()) => {
                    tracing::warn!(driver = %self.driver, group = %record.group, claim = %record.claim_uid, journal = %journal.path().display(), "the bind journal had lost a group bound for a prepared claim: written back from the checkpoint");
                }
                Err(error) => {
                    tracing::error!(driver = %self.driver, group = %record.group, %error, "cannot write a group bound for a prepared claim back into the bind journal");
                }
            }
        }
    }

    /// Binds every group the journal holds for `claim_uid` back to the
    /// drivers it had, and those of `recorded` (the claim's checkpoint
    /// copy) the journal lost; with a journal that cannot be used, the
    /// checkpoint's copy alone. The error names the group and what failed.
    pub async fn release(
        &self,
        resource: &Resource,
        claim_uid: &str,
        recorded: &[GroupRecord],
    ) -> Result<(), String> {
        self.reseed(recorded);
        let journal: Arc<dyn Journal> = match &self.journal {
            Ok(journal) => Arc::clone(journal) as Arc<dyn Journal>,
            Err(_) if !recorded.is_empty() => Arc::new(CheckpointCopy),
            // Nothing recorded for the claim, and the journal unreadable:
            // nothing is known to give back (said at start, naming it).
            Err(_) => return Ok(()),
        };
        let records = match &self.journal {
            Ok(_) => self.records().remove(claim_uid).unwrap_or_default(),
            Err(_) => recorded.to_vec(),
        };
        if records.is_empty() {
            return Ok(());
        }
        for record in records {
            let binder = Arc::clone(&self.binder);
            let journal = Arc::clone(&journal);
            let group = record.group.clone();
            let started = Instant::now();
            let restored = blocking(move || binder.restore(&record, journal.as_ref()))
                .await
                .map_err(|e| e.to_string())?;
            let outcome = if restored.is_ok() {
                PassthroughOutcome::Success
            } else {
                PassthroughOutcome::Failure
            };
            self.count(RESTORE, outcome, started);
            restored.map_err(|e| format!("IOMMU group {group}: {e}"))?;
            tracing::info!(driver = %self.driver, claim = claim_uid, group, took_ms = started.elapsed().as_millis(), "IOMMU group bound back to its previous drivers");
        }
        resource.request_refresh();
        Ok(())
    }
}

/// The journal a restore uses when the bind journal cannot be read: the
/// prepared claim's checkpoint copy is the record, so there is nothing to
/// keep or forget.
#[derive(Debug)]
struct CheckpointCopy;

impl Journal for CheckpointCopy {
    fn record(&self, _record: &GroupRecord) -> Result<(), wdp_passthrough::JournalError> {
        Ok(())
    }

    fn forget(&self, _group: &str) -> Result<(), wdp_passthrough::JournalError> {
        Ok(())
    }

    fn records(&self) -> Result<Vec<GroupRecord>, wdp_passthrough::JournalError> {
        Ok(Vec::new())
    }
}

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, BindFailure> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| BindFailure::Task(e.to_string()))
}

/// What the `passthrough` guest is asked.
fn bind_request(claim: &ClaimRef, device_id: &str, plan: &BindPlan) -> wdp_policy::BindRequest {
    wdp_policy::BindRequest {
        claim: format!("{}/{}", claim.namespace, claim.name),
        claim_uid: claim.uid.clone(),
        device_id: device_id.to_owned(),
        driver: plan.target.clone(),
        iommu_group: plan.group.clone(),
        functions: plan
            .functions
            .iter()
            .map(|f| wdp_policy::PciFunction {
                address: f.address.clone(),
                driver: f.driver.clone(),
                attributes: vec![
                    ("class".to_owned(), format!("0x{:06x}", f.class)),
                    ("vendor".to_owned(), format!("0x{:04x}", f.vendor)),
                    ("device".to_owned(), format!("0x{:04x}", f.device)),
                ],
            })
            .collect(),
    }
}

/// This driver's results of `claim` that wait on [`BOUND_CONDITION`].
fn waiting_results<'a>(
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
fn decided(claim: &ResourceClaim, result: &DeviceRequestAllocationResult) -> bool {
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
fn condition_statuses(
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

/// Binds the groups of the advertised devices `ids` for `claim`; answers
/// each device's bound groups.
async fn bind_devices(
    preparer: &ClaimPreparer,
    claim: &ClaimRef,
    ids: &[String],
) -> Result<Vec<(String, BoundGroup)>, BindFailure> {
    let Some(binds) = preparer.passthrough() else {
        return Ok(Vec::new());
    };
    let set = preparer.resource().devices();
    let others = held_functions(preparer, &claim.uid).await;
    let mut bound = Vec::new();
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
        for group in binds
            .ensure_bound(preparer.resource(), claim, id, &functions, &others)
            .await?
        {
            bound.push((id.clone(), group));
        }
    }
    Ok(bound)
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
    if preparer.is_prepared(uid).await {
        return;
    }
    if let Err(error) = release(preparer, uid).await {
        tracing::error!(driver = %preparer.driver(), claim = uid, %error, "cannot bind the IOMMU groups of a claim that is gone back to their drivers");
    }
}

#[cfg(test)]
#[path = "passthrough_tests.rs"]
mod tests;
