//! The [`Binder`]: plans, binds, restores and recovers IOMMU groups, one
//! operation per group at a time.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{BindError, Refusal, RefusalReason};
use crate::journal::{GroupRecord, Journal, Phase, RecordedFunction};
use crate::plan::{BindPlan, plain_name};
use crate::sysfs::{Root, current_driver, driver_override, link_name, wait_until, write_control};

/// How a [`Binder`] binds.
#[derive(Clone, Debug)]
pub struct BindSettings {
    /// The most a bind may take, from its first sysfs write until every
    /// function is on the target and the group's node is there; and, on
    /// its own, the most an undo or a restore may take. Past it the bind
    /// is undone.
    pub deadline: Duration,
}

impl Default for BindSettings {
    /// A 20 s deadline: a GPU driver's remove takes a few seconds.
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(20),
        }
    }
}

/// A group bound for a claim: what its CDI spec grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundGroup {
    /// The IOMMU group.
    pub group: String,
    /// The claim.
    pub claim_uid: String,
    /// Host paths (without the host root) of the nodes a container needs:
    /// `/dev/vfio/<group>` and the container node `/dev/vfio/vfio`.
    pub nodes: Vec<String>,
}

/// What [`Binder::recover`] did with one journal record (or the journal).
#[derive(Debug)]
pub enum RecoveryOutcome {
    /// A bind cut short (phase `Binding`) was undone: its functions are back
    /// on their previous drivers and the record is gone.
    Undone {
        /// The group.
        group: String,
        /// The claim it was being bound for.
        claim_uid: String,
    },
    /// A bound group was kept for its claim (the caller decides).
    Kept {
        /// The group.
        group: String,
        /// Its claim.
        claim_uid: String,
        /// Whether every function is still on the target and the group's
        /// node is there.
        intact: bool,
    },
    /// Undoing a cut-short bind failed; the record stays for the next try.
    Failed {
        /// The group.
        group: String,
        /// The claim.
        claim_uid: String,
        /// Why.
        error: BindError,
    },
    /// The journal could not be read: nothing was done.
    Unreadable(BindError),
}

impl std::fmt::Display for RecoveryOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Undone { group, claim_uid } => write!(
                f,
                "IOMMU group {group}: a bind for claim {claim_uid} was cut short; its functions are back on their previous drivers"
            ),
            Self::Kept {
                group,
                claim_uid,
                intact,
            } => write!(
                f,
                "IOMMU group {group}: kept bound for claim {claim_uid}{}",
                if *intact {
                    ""
                } else {
                    " (but not every function is on the target driver now, or its node is missing)"
                }
            ),
            Self::Failed {
                group,
                claim_uid,
                error,
            } => write!(
                f,
                "IOMMU group {group}: undoing the cut-short bind for claim {claim_uid} failed: {error}"
            ),
            Self::Unreadable(error) => write!(f, "passthrough journal unreadable: {error}"),
        }
    }
}

/// Binds IOMMU groups to a passthrough driver and back, beneath a host
/// root. `Send + Sync`: share one per host; it lets one bind, undo or
/// restore run per group at a time and refuses a second claim's meanwhile.
#[derive(Debug)]
pub struct Binder {
    root: Root,
    settings: BindSettings,
    /// Groups with an operation under way, and for which claim.
    busy: Mutex<HashMap<String, String>>,
}

/// A group's operation slot, released on drop.
struct Slot<'a> {
    binder: &'a Binder,
    group: String,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.binder.busy().remove(&self.group);
    }
}

impl Binder {
    /// A binder for the host root `host_root` (`/` on a node).
    pub fn new(host_root: impl Into<PathBuf>, settings: BindSettings) -> Self {
        Self {
            root: Root::new(host_root.into()),
            settings,
            busy: Mutex::new(HashMap::new()),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &BindSettings {
        &self.settings
    }

    fn busy(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.busy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the group's slot for `claim_uid`, or says who holds it.
    fn acquire(&self, device: &str, group: &str, claim_uid: &str) -> Result<Slot<'_>, Refusal> {
        let mut busy = self.busy();
        if let Some(holder) = busy.get(group) {
            let reason = if holder == claim_uid {
                RefusalReason::InProgress(holder.clone())
            } else {
                RefusalReason::HeldByClaim(holder.clone())
            };
            return Err(Refusal::new(device, device, Some(group.to_owned()), reason));
        }
        busy.insert(group.to_owned(), claim_uid.to_owned());
        Ok(Slot {
            binder: self,
            group: group.to_owned(),
        })
    }

    /// The IOMMU group of function `address` (its `iommu_group` link), or
    /// `None` when it has none or cannot be read. Reads one link: what a
    /// caller needs to tell which binds may run side by side (one
    /// operation runs per group at a time).
    pub fn iommu_group(&self, address: &str) -> Option<String> {
        if !plain_name(address) {
            return None;
        }
        let link = self
            .root
            .real(&format!("/sys/bus/pci/devices/{address}/iommu_group"));
        link_name(&link).ok().flatten()
    }

    /// Plans binding `address`'s whole IOMMU group to `target_driver`:
    /// reads the group and every function in it, and applies the host's
    /// refusals to each function but bridges (the boot display; a network
    /// interface that is up, addressed or routed; a mounted or swapping
    /// block device; a function `held_by_other` names a claim for; no IOMMU
    /// group; the target driver not loaded). Reads only.
    pub fn plan(
        &self,
        address: &str,
        target_driver: &str,
        held_by_other: &dyn Fn(&str) -> Option<String>,
    ) -> Result<BindPlan, Refusal> {
        crate::plan::plan(&self.root, address, target_driver, held_by_other)
    }

    /// Binds the plan's group for `claim_uid`. The group is planned again
    /// first (the host's refusals hold at the time of the bind; the drivers
    /// recorded are the ones the functions have then), and refused when the
    /// journal holds it for another claim. The previous drivers are
    /// journaled (phase `Binding`) before the first write; then each
    /// function to move gets the target as `driver_override` and is
    /// unbound from its driver, then probed (`drivers_probe`); the bind
    /// waits until each is on the target and `/dev/vfio/<group>` is there,
    /// and journals phase `Bound`. On any failure or past the deadline the
    /// functions are put back on their previous drivers and the record
    /// forgotten. A group the journal holds bound for the same claim is
    /// returned as it is (a retried prepare).
    pub fn bind(
        &self,
        claim_uid: &str,
        plan: &BindPlan,
        journal: &dyn Journal,
    ) -> Result<BoundGroup, BindError> {
        let _slot = self.acquire(&plan.device, &plan.group, claim_uid)?;
        if let Some(existing) = journal
            .records()?
            .into_iter()
            .find(|r| r.group == plan.group)
        {
            if existing.claim_uid != claim_uid {
                return Err(Refusal::new(
                    &plan.device,
                    &plan.device,
                    Some(plan.group.clone()),
                    RefusalReason::HeldByClaim(existing.claim_uid),
                )
                .into());
            }
            if existing.phase == Phase::Bound && self.is_bound(&existing) {
                return Ok(self.bound(&existing));
            }
            // Half done (or changed since): back to the previous drivers, then anew.
            self.restore_functions(&existing, Instant::now() + self.settings.deadline)?;
            journal.forget(&existing.group)?;
        }
        let fresh = crate::plan::plan(&self.root, &plan.device, &plan.target, &|_| None)?;
        same_group(plan, &fresh)?;
        let mut record = fresh.record(claim_uid);
        journal.record(&record)?;
        let deadline = Instant::now() + self.settings.deadline;
        let moved = self.move_group(&fresh, deadline).and_then(|()| {
            record.phase = Phase::Bound;
            journal.record(&record).map_err(BindError::from)
        });
        match moved {
            Ok(()) => Ok(self.bound(&record)),
            Err(error) => {
                let undone = self
                    .restore_functions(&record, Instant::now() + self.settings.deadline)
                    .and_then(|()| journal.forget(&record.group).map_err(BindError::from));
                match undone {
                    Ok(()) => Err(error),
                    Err(undo) => Err(BindError::UndoFailed {
                        error: Box::new(error),
                        undo: Box::new(undo),
                    }),
                }
            }
        }
    }

    /// Puts every function of `record` back on the driver it had (or
    /// leaves it unbound where it had none), clears their
    /// `driver_override`, waits until `/dev/vfio/<group>` is gone (unless a
    /// function was on the target before the bind) and forgets the record.
    /// Idempotent: restoring a restored group, or a half-done bind, works.
    pub fn restore(&self, record: &GroupRecord, journal: &dyn Journal) -> Result<(), BindError> {
        let device = record
            .functions
            .first()
            .map_or(record.group.as_str(), |f| f.address.as_str());
        let _slot = self.acquire(device, &record.group, &record.claim_uid)?;
        if let Some(other) = journal
            .records()?
            .into_iter()
            .find(|r| r.group == record.group && r.claim_uid != record.claim_uid)
        {
            return Err(Refusal::new(
                device,
                device,
                Some(record.group.clone()),
                RefusalReason::HeldByClaim(other.claim_uid),
            )
            .into());
        }
        self.restore_functions(record, Instant::now() + self.settings.deadline)?;
        journal.forget(&record.group)?;
        Ok(())
    }

    /// At the host's start: undoes every bind the journal holds in phase
    /// `Binding` (the host was killed mid-bind) and keeps `Bound` ones,
    /// saying whether they are intact. One outcome per record.
    pub fn recover(&self, journal: &dyn Journal) -> Vec<RecoveryOutcome> {
        let records = match journal.records() {
            Ok(records) => records,
            Err(e) => return vec![RecoveryOutcome::Unreadable(e.into())],
        };
        records
            .into_iter()
            .map(|record| match record.phase {
                Phase::Bound => RecoveryOutcome::Kept {
                    intact: self.is_bound(&record),
                    group: record.group,
                    claim_uid: record.claim_uid,
                },
                Phase::Binding => match self.restore(&record, journal) {
                    Ok(()) => RecoveryOutcome::Undone {
                        group: record.group,
                        claim_uid: record.claim_uid,
                    },
                    Err(error) => RecoveryOutcome::Failed {
                        group: record.group,
                        claim_uid: record.claim_uid,
                        error,
                    },
                },
            })
            .collect()
    }

    /// Whether every function of `record` is on its target and the
    /// group's node and the container node are there.
    pub fn is_bound(&self, record: &GroupRecord) -> bool {
        record.functions.iter().all(|f| {
            current_driver(&self.root, &f.address)
                .ok()
                .flatten()
                .as_deref()
                == Some(record.target.as_str())
        }) && self.nodes_present(&record.group)
    }

    fn bound(&self, record: &GroupRecord) -> BoundGroup {
        BoundGroup {
            group: record.group.clone(),
            claim_uid: record.claim_uid.clone(),
            nodes: vec![
                format!("/dev/vfio/{}", record.group),
                "/dev/vfio/vfio".to_owned(),
            ],
        }
    }

    fn nodes_present(&self, group: &str) -> bool {
        self.root.real(&format!("/dev/vfio/{group}")).exists()
            && self.root.real("/dev/vfio/vfio").exists()
    }

    /// Moves every function of the plan to the target: overrides and
    /// unbinds them all, then probes each, then waits for the nodes.
    fn move_group(&self, plan: &BindPlan, deadline: Instant) -> Result<(), BindError> {
        let target = plan.target.as_str();
        for function in plan.moves() {
            let address = function.address.as_str();
            self.write(
                &format!("/sys/bus/pci/devices/{address}/driver_override"),
                target,
                deadline,
            )?;
            if let Some(driver) = &function.driver {
                self.unbind(address, driver, deadline)?;
            }
        }
        for function in plan.moves() {
            let address = function.address.as_str();
            self.write("/sys/bus/pci/drivers_probe", address, deadline)?;
            self.await_driver(address, target, deadline)?;
        }
        let node = format!("/dev/vfio/{}", plan.group);
        for node in [node.as_str(), "/dev/vfio/vfio"] {
            if !wait_until(deadline, || self.root.real(node).exists()) {
                return Err(BindError::Node {
                    path: node.to_owned(),
                    appear: true,
                    after: self.settings.deadline,
                });
            }
        }
        Ok(())
    }

    /// Puts each function back; tries them all and returns the first error.
    fn restore_functions(&self, record: &GroupRecord, deadline: Instant) -> Result<(), BindError> {
        let mut first_error = None;
        for function in &record.functions {
            if function.previous_driver.as_deref() == Some(record.target.as_str()) {
                continue;
            }
            if let Err(e) = self.restore_function(function, deadline)
                && first_error.is_none()
            {
                first_error = Some(e);
            }
        }
        if let Some(error) = first_error {
            return Err(error);
        }
        let stays = record
            .functions
            .iter()
            .any(|f| f.previous_driver.as_deref() == Some(record.target.as_str()));
        let node = format!("/dev/vfio/{}", record.group);
        if !stays && !wait_until(deadline, || !self.root.real(&node).exists()) {
            return Err(BindError::Node {
                path: node,
                appear: false,
                after: self.settings.deadline,
            });
        }
        Ok(())
    }

    fn restore_function(
        &self,
        function: &RecordedFunction,
        deadline: Instant,
    ) -> Result<(), BindError> {
        let address = function.address.as_str();
        if !plain_name(address) {
            return Err(BindError::GroupChanged {
                group: String::new(),
                detail: format!("{address:?} is no PCI address"),
            });
        }
        if driver_override(&self.root, address).is_some() {
            self.write(
                &format!("/sys/bus/pci/devices/{address}/driver_override"),
                "",
                deadline,
            )?;
        }
        let now = current_driver(&self.root, address)?;
        if now == function.previous_driver {
            return Ok(());
        }
        if let Some(driver) = &now {
            self.unbind(address, driver, deadline)?;
        }
        let Some(previous) = &function.previous_driver else {
            return Ok(());
        };
        if !plain_name(previous) {
            return Err(BindError::GroupChanged {
                group: String::new(),
                detail: format!("{previous:?} is no driver name"),
            });
        }
        let bind = self.write(
            &format!("/sys/bus/pci/drivers/{previous}/bind"),
            address,
            deadline,
        );
        if let Err(BindError::Write { .. }) = bind {
            // The driver refused the explicit bind (or is not loaded): let
            // the kernel match the function as at boot.
            self.write("/sys/bus/pci/drivers_probe", address, deadline)?;
        } else {
            bind?;
        }
        self.await_driver(address, previous, deadline)
    }

    /// Unbinds `address` from `driver` and waits for the link to go.
    fn unbind(&self, address: &str, driver: &str, deadline: Instant) -> Result<(), BindError> {
        self.write(
            &format!("/sys/bus/pci/drivers/{driver}/unbind"),
            address,
            deadline,
        )?;
        let mut now = None;
        let gone = wait_until(deadline, || {
            now = current_driver(&self.root, address).ok().flatten();
            now.as_deref() != Some(driver)
        });
        if gone {
            Ok(())
        } else {
            Err(BindError::DidNotLetGo {
                function: address.to_owned(),
                driver: driver.to_owned(),
                after: self.settings.deadline,
            })
        }
    }

    /// Waits until `address` is bound to `driver`.
    fn await_driver(
        &self,
        address: &str,
        driver: &str,
        deadline: Instant,
    ) -> Result<(), BindError> {
        let mut now = None;
        let bound = wait_until(deadline, || {
            now = current_driver(&self.root, address).ok().flatten();
            now.as_deref() == Some(driver)
        });
        if bound {
            Ok(())
        } else {
            Err(BindError::NotBound {
                function: address.to_owned(),
                driver: driver.to_owned(),
                now,
                after: self.settings.deadline,
            })
        }
    }

    fn write(&self, host: &str, value: &str, deadline: Instant) -> Result<(), BindError> {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        write_control(&self.root, host, value, left).map_err(|e| match e {
            // Said as the deadline the settings give, not what was left of it.
            BindError::WriteHung { path, value, .. } => BindError::WriteHung {
                path,
                value,
                after: self.settings.deadline,
            },
            other => other,
        })
    }
}

/// Fails when the group's functions differ from the plan's.
fn same_group(planned: &BindPlan, fresh: &BindPlan) -> Result<(), BindError> {
    let addresses = |p: &BindPlan| -> Vec<(String, bool)> {
        p.functions
            .iter()
            .map(|f| (f.address.clone(), f.bridge))
            .collect()
    };
    if planned.group != fresh.group || addresses(planned) != addresses(fresh) {
        return Err(BindError::GroupChanged {
            group: planned.group.clone(),
            detail: format!(
                "planned group {} with {:?}, now group {} with {:?}",
                planned.group,
                addresses(planned),
                fresh.group,
                addresses(fresh)
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binder_is_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Binder>();
        shared::<crate::FileJournal>();
    }
}
