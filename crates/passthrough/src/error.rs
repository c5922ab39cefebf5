//! What can go wrong: the host's refusals to bind a group ([`Refusal`]),
//! a bind, undo or restore that failed ([`BindError`]), and a journal that
//! could not be read or written ([`JournalError`]).

use std::path::PathBuf;
use std::time::Duration;

/// The host refuses to bind a device's IOMMU group: no guest can override
/// this. Its `Display` names the device asked for, the function of the
/// group the refusal is about and why:
/// `0000:17:00.1 (in IOMMU group 30 of 0000:17:00.0): network interface ens1f1 is up`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Refusal {
    /// The PCI address the claim asked for.
    pub device: String,
    /// The function of its group the refusal is about (`device` itself, or
    /// another function of the same IOMMU group).
    pub function: String,
    /// The IOMMU group, when the device has one.
    pub group: Option<String>,
    /// Why.
    pub reason: Box<RefusalReason>,
}

impl Refusal {
    /// A refusal of `device` because of `function` of its group.
    pub fn new(
        device: impl Into<String>,
        function: impl Into<String>,
        group: Option<String>,
        reason: RefusalReason,
    ) -> Self {
        Self {
            device: device.into(),
            function: function.into(),
            group,
            reason: Box::new(reason),
        }
    }

    fn describe(&self) -> String {
        match &self.group {
            Some(group) if self.function != self.device => format!(
                "{} (in IOMMU group {group} of {}): {}",
                self.function, self.device, self.reason
            ),
            Some(group) => format!("{} (IOMMU group {group}): {}", self.device, self.reason),
            None => format!("{}: {}", self.device, self.reason),
        }
    }
}

/// Why the host refuses a bind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    /// The address is no PCI function of this host.
    #[error("no such PCI function (no /sys/bus/pci/devices/{0})")]
    NoSuchDevice(String),
    /// The function has no `iommu_group` link: vfio needs one.
    #[error(
        "no IOMMU group: is the IOMMU on (intel_iommu=on / amd_iommu=on on the kernel command line)?"
    )]
    NoIommuGroup,
    /// The target driver is not loaded (`/sys/bus/pci/drivers/<target>` is missing).
    #[error("driver {0} is not loaded (no /sys/bus/pci/drivers/{0}: modprobe {0})")]
    DriverNotLoaded(String),
    /// The function is the boot display (`boot_vga` = 1).
    #[error("it is the boot display (boot_vga = 1)")]
    BootDisplay,
    /// A network interface of the function is up.
    #[error("network interface {0} is up")]
    NetworkUp(String),
    /// A network interface of the function carries an address.
    #[error("network interface {interface} carries address {address}")]
    NetworkAddress {
        /// The interface.
        interface: String,
        /// One of its addresses.
        address: String,
    },
    /// A network interface of the function carries a route.
    #[error("network interface {interface} carries a route ({route})")]
    NetworkRoute {
        /// The interface.
        interface: String,
        /// The route's destination, as the kernel lists it.
        route: String,
    },
    /// A block device of the function (or a partition or holder of it) is mounted.
    #[error("block device {device} is mounted on {mount_point}")]
    Mounted {
        /// The block device (`nvme0n1p1`, `dm-0`).
        device: String,
        /// Where (a mount point of the host's first process).
        mount_point: String,
    },
    /// A block device of the function (or a partition or holder) is used as swap.
    #[error("block device {0} is used as swap")]
    Swap(String),
    /// The function is held by another claim.
    #[error("held by claim {0}")]
    HeldByClaim(String),
    /// A bind or restore of the group for the same claim is under way.
    #[error("a bind or restore of its group for claim {0} is under way")]
    InProgress(String),
    /// Something the checks need could not be read, so the host cannot tell
    /// that the function is unused.
    #[error("cannot tell whether it is in use: {0}")]
    Unknown(String),
}

/// A bind, its undo or a restore that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The host refuses the bind (checked again when binding).
    #[error("{0}")]
    Refused(#[from] Refusal),
    /// The group no longer holds what the plan said.
    #[error("IOMMU group {group} changed since it was planned: {detail}")]
    GroupChanged {
        /// The group.
        group: String,
        /// What changed.
        detail: String,
    },
    /// A function's driver did not release it.
    #[error("{function} still bound to {driver} after {after:?}: the driver did not let go")]
    DidNotLetGo {
        /// The function.
        function: String,
        /// Its driver.
        driver: String,
        /// The deadline.
        after: Duration,
    },
    /// A function did not come to be bound to the driver wanted.
    #[error("{function} not bound to {driver} after {after:?} ({})", now_words(.now))]
    NotBound {
        /// The function.
        function: String,
        /// The driver it should be bound to.
        driver: String,
        /// What it is bound to now.
        now: Option<String>,
        /// The deadline.
        after: Duration,
    },
    /// A device node did not appear or go.
    #[error("{path} did not {} within {after:?}", if *.appear { "appear" } else { "go" })]
    Node {
        /// Its host path.
        path: String,
        /// Whether it should have appeared (else gone).
        appear: bool,
        /// The deadline.
        after: Duration,
    },
    /// A sysfs write failed.
    #[error("writing {value:?} to {path}: {error}")]
    Write {
        /// The host path written.
        path: String,
        /// What was written (without the newline).
        value: String,
        /// The OS's words.
        error: String,
    },
    /// A sysfs write did not return in time (a driver's remove or probe
    /// blocking in the kernel); the writing thread is left behind.
    #[error("writing {value:?} to {path} did not return within {after:?}")]
    WriteHung {
        /// The host path written.
        path: String,
        /// What was written.
        value: String,
        /// The deadline.
        after: Duration,
    },
    /// A sysfs file could not be read.
    #[error("reading {path}: {error}")]
    Read {
        /// The host path.
        path: String,
        /// Why.
        error: String,
    },
    /// The bind failed and undoing it failed too: the record stays in the
    /// journal in phase `Binding`, so the next start undoes it.
    #[error(
        "{error}; undoing it failed too: {undo} (the journal keeps the group; the next start retries the undo)"
    )]
    UndoFailed {
        /// Why the bind failed.
        error: Box<BindError>,
        /// Why undoing it failed.
        undo: Box<BindError>,
    },
    /// The journal could not be read or written.
    #[error("{0}")]
    Journal(#[from] JournalError),
}

fn now_words(now: &Option<String>) -> String {
    match now {
        Some(driver) => format!("bound to {driver}"),
        None => "unbound".to_owned(),
    }
}

/// A journal that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The journal file could not be read, written or renamed into place.
    #[error("passthrough journal {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS's words.
        error: String,
    },
    /// The journal file does not parse: nothing was changed.
    #[error("passthrough journal {} is damaged ({detail}); nothing was bound or restored: repair or remove it (a removed journal forgets which drivers the groups it listed had)", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// Another store (a checkpoint) failed.
    #[error("passthrough journal: {0}")]
    Other(String),
}
