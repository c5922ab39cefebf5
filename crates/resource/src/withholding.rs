//! Devices a resource must not offer for now, whatever their health: while
//! a resource moves from one kubelet API to the other, the devices the
//! other API handed out to running containers (or all of them, while
//! nobody can tell which those are).
//!
//! A [`Withholding`] travels with the device set ([`crate::DeviceSet`]):
//! the device-plugin API reports a withheld device `Unhealthy` (the
//! kubelet stops counting it as allocatable and never picks it), the DRA
//! driver leaves it out of its ResourceSlices (and so do the partitions
//! on it), and both final gates — `Allocate` and `NodePrepareResources` —
//! refuse it, naming the reason. Withholding is by device ID (the
//! hardware), so every replica and partition of a withheld device is
//! withheld too.

use std::collections::BTreeSet;

/// Which devices are withheld.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum WithheldDevices {
    /// None: every device is offered as its health says.
    #[default]
    None,
    /// Every device: which ones another API handed out is not known (yet).
    All,
    /// These device IDs.
    Some(BTreeSet<String>),
}

/// The devices withheld, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Withholding {
    /// Which devices.
    pub(crate) devices: WithheldDevices,
    /// Why, for logs and refusals (for example "held by running containers
    /// through the device-plugin API").
    pub reason: String,
}

impl Withholding {
    /// Nothing withheld.
    pub fn none() -> Self {
        Self::default()
    }

    /// Every device withheld, for `reason`.
    pub fn all(reason: impl Into<String>) -> Self {
        Self {
            devices: WithheldDevices::All,
            reason: reason.into(),
        }
    }

    /// The devices `ids` withheld, for `reason` (nothing when `ids` is
    /// empty).
    pub fn some(ids: BTreeSet<String>, reason: impl Into<String>) -> Self {
        if ids.is_empty() {
            return Self::none();
        }
        Self {
            devices: WithheldDevices::Some(ids),
            reason: reason.into(),
        }
    }

    /// Whether device `device_id` (a device ID, not a replica's kubelet
    /// ID) is withheld.
    pub fn withholds(&self, device_id: &str) -> bool {
        match &self.devices {
            WithheldDevices::None => false,
            WithheldDevices::All => true,
            WithheldDevices::Some(ids) => ids.contains(device_id),
        }
    }

    /// Whether nothing is withheld.
    pub fn is_empty(&self) -> bool {
        self.devices == WithheldDevices::None
    }

    /// How many devices are withheld, out of `total`.
    pub fn count(&self, total: usize) -> usize {
        match &self.devices {
            WithheldDevices::None => 0,
            WithheldDevices::All => total,
            WithheldDevices::Some(ids) => ids.len(),
        }
    }
}

#[cfg(test)]
#[path = "withholding_tests.rs"]
mod tests;
