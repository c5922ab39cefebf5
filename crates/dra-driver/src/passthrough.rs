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
//!
//! This module holds the binds themselves ([`PassthroughBinds`]), what
//! the slices publish and what `check` prints; `claims` the claim watch and
//! the conditions it writes; `prepare_side` what prepare and unprepare do.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wdp_config::ResourceConfig;
use wdp_dra_client::BindingConditions;
use wdp_passthrough::{
    BindError, BindPlan, BindSettings, Binder, BoundGroup, FileJournal, GroupRecord, Journal,
    RecoveryOutcome,
};
use wdp_resource::{AdvertisedDevice, DeviceSet, Resource};

use crate::claim::ClaimRef;
use crate::metrics::{DraMetrics, PassthroughOutcome};
use crate::standard_attributes::{PCI_ADDRESS_FACT, is_pci_address};

/// The binding condition of a passthrough device: `True` once its IOMMU
/// group is bound to the resource's `bind-driver`.
pub const BOUND_CONDITION: &str = "PassthroughBound";
/// Its failure condition: `True` when the host or a guest refused the bind
/// or it failed; the scheduler then gives the allocation up.
pub const BIND_FAILED_CONDITION: &str = "PassthroughBindFailed";

/// The `operation` label of a bind, and of a restore.
const BIND: &str = "bind";
const RESTORE: &str = "restore";

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

    /// The IOMMU groups of the functions of each device of `devices`, in
    /// order (a function without a group adds none: binding it is refused
    /// anyway), read off the async workers.
    pub async fn groups_of(
        &self,
        devices: Vec<Vec<String>>,
    ) -> Result<Vec<BTreeSet<String>>, BindFailure> {
        let binder = Arc::clone(&self.binder);
        blocking(move || {
            devices
                .iter()
                .map(|functions| {
                    functions
                        .iter()
                        .filter_map(|f| binder.iommu_group(f))
                        .collect()
                })
                .collect()
        })
        .await
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
        // With the journal unreadable, the checkpoint's copy is the record
        // (none: nothing is known to give back; said at start, naming it).
        let (journal, records): (Arc<dyn Journal>, Vec<GroupRecord>) = match &self.journal {
            Ok(journal) => (
                Arc::clone(journal) as Arc<dyn Journal>,
                self.records().remove(claim_uid).unwrap_or_default(),
            ),
            Err(_) => (Arc::new(CheckpointCopy), recorded.to_vec()),
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

#[path = "passthrough_claims.rs"]
mod claims;
#[path = "passthrough_prepare.rs"]
mod prepare_side;

pub(crate) use claims::recover_then_follow;
pub(crate) use prepare_side::{
    bind_for_prepare, bind_recorded, bound_groups, release, release_recorded,
};

#[cfg(test)]
#[path = "passthrough_tests.rs"]
mod tests;
