//! Passthrough bound on demand, the kernel side: binds a PCI function's
//! whole IOMMU group to a passthrough driver (`vfio-pci`) when a claim is
//! allocated, and back to the drivers it had when the claim goes. All of
//! it beneath a *host root* (`/` on a node, `/host` in a DaemonSet, a
//! fixture tree in tests), with blocking std I/O (call it from async code
//! through `spawn_blocking`).
//!
//! - [`Binder::plan`] reads the function's IOMMU group
//!   (`/sys/bus/pci/devices/<addr>/iommu_group` →
//!   `/sys/kernel/iommu_groups/<n>/devices`) and every function in it, and
//!   applies the host's refusals to each ([`Refusal`]: the boot display, a
//!   network interface that is up, addressed or routed, a mounted or
//!   swapping block device, a function of another claim, no IOMMU group).
//!   PCI bridges stay on their driver. No guest can override a refusal.
//! - [`Binder::bind`] journals the previous drivers ([`Journal`], phase
//!   `Binding`) before its first write, then per function writes
//!   `driver_override`, unbinds, probes (`drivers_probe`), waits for the
//!   target driver and `/dev/vfio/<group>` under a deadline, and journals
//!   `Bound`; on failure it puts the group back as it was.
//! - [`Binder::restore`] puts each function back on its recorded driver;
//!   [`Binder::recover`], at the host's start, undoes binds a kill cut short.
//!
//! Only one operation runs per group at a time; a second claim's is
//! refused, naming the claim that holds the group. Every wait has a
//! deadline, and a sysfs write that blocks in the kernel (a driver whose
//! remove never returns) is given up on at the deadline. It does not
//! decide which devices a claim gets, write CDI specs or ask guests:
//! the DRA driver does.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod binder;
mod checks;
mod error;
mod journal;
mod plan;
mod sysfs;

pub use binder::{BindSettings, Binder, BoundGroup, RecoveryOutcome};
pub use error::{BindError, JournalError, Refusal, RefusalReason};
pub use journal::{FileJournal, GroupRecord, Journal, Phase, RecordedFunction};
pub use plan::{BindPlan, PlannedFunction};
