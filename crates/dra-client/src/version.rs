//! The API server's version, and the ResourceSlice limits that follow from it.
//!
//! Kubernetes 1.35 changed where shared counters live: on 1.34 a counter set
//! is in the same ResourceSlice as the devices consuming it (at most 32
//! counters in all the sets of a slice, at most 32 consumed counters per
//! device and 1024 per slice); from 1.35 on, counter sets are in slices of
//! their own (at most 8 sets a slice, 32 counters a set, names unique in the
//! pool) and a device consumes from at most 2 sets, up to 32 counters from
//! each. A device may have 4 taints on 1.34, 16 from 1.35 on, and only
//! from 1.35 on may a taint have the effect `None`.
//! [`ServerVersion::limits`] gives the numbers; [`crate::plan`] and
//! [`crate::validate_pool`] follow them.

use std::fmt;

use k8s_openapi::apimachinery::pkg::version::Info;

/// At most this many taints per device from Kubernetes 1.35 on (1.34
/// allows 4, see [`SliceLimits::max_taints_per_device`]).
pub const MAX_TAINTS_PER_DEVICE: usize = 16;
/// At most this many devices in one ResourceSlice.
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// At most this many devices in a ResourceSlice holding any tainted device
/// (or, from 1.35 on, any device consuming counters).
pub const MAX_DEVICES_PER_TAINTED_SLICE: usize = 64;

/// A Kubernetes API server's `major.minor` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServerVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version (34, 35, …).
    pub minor: u32,
}

impl ServerVersion {
    /// Kubernetes 1.34: counter sets in the slices of their consumers.
    pub const V1_34: ServerVersion = ServerVersion {
        major: 1,
        minor: 34,
    };
    /// Kubernetes 1.35: counter sets in slices of their own.
    pub const V1_35: ServerVersion = ServerVersion {
        major: 1,
        minor: 35,
    };

    /// The version a `GET /version` answered. The minor version may carry a
    /// vendor's suffix (`"35+"`); when neither it nor `gitVersion`
    /// (`v1.35.2-…`) can be read, `None`.
    pub fn from_info(info: &Info) -> Option<Self> {
        let leading_number = |text: &str| -> Option<u32> {
            let digits: String = text.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        };
        if let (Some(major), Some(minor)) =
            (leading_number(&info.major), leading_number(&info.minor))
        {
            return Some(Self { major, minor });
        }
        let version = info.git_version.strip_prefix('v')?;
        let mut parts = version.split('.');
        let major = leading_number(parts.next()?)?;
        let minor = leading_number(parts.next()?)?;
        Some(Self { major, minor })
    }

    /// Whether counter sets go into slices of their own (1.35 and later).
    pub fn separates_counter_sets(self) -> bool {
        self >= Self::V1_35
    }

    /// The ResourceSlice limits of this version.
    pub fn limits(self) -> SliceLimits {
        if self.separates_counter_sets() {
            SliceLimits {
                max_devices: MAX_DEVICES_PER_SLICE,
                max_devices_with_taints_or_counters: MAX_DEVICES_PER_TAINTED_SLICE,
                counters_lower_device_limit: true,
                max_counter_sets_per_slice: Some(8),
                max_counters_per_slice: None,
                max_counters_per_set: 32,
                max_consumptions_per_device: Some(2),
                max_counters_per_consumption: 32,
                max_consumed_counters_per_device: None,
                max_consumed_counters_per_slice: None,
                max_taints_per_device: MAX_TAINTS_PER_DEVICE,
                taint_effect_none: true,
            }
        } else {
            SliceLimits {
                max_devices: MAX_DEVICES_PER_SLICE,
                max_devices_with_taints_or_counters: MAX_DEVICES_PER_TAINTED_SLICE,
                counters_lower_device_limit: false,
                max_counter_sets_per_slice: None,
                max_counters_per_slice: Some(32),
                max_counters_per_set: 32,
                max_consumptions_per_device: None,
                max_counters_per_consumption: 32,
                max_consumed_counters_per_device: Some(32),
                max_consumed_counters_per_slice: Some(1024),
                max_taints_per_device: 4,
                taint_effect_none: false,
            }
        }
    }
}

impl Default for ServerVersion {
    /// The newest layout this crate knows (1.35).
    fn default() -> Self {
        Self::V1_35
    }
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What one ResourceSlice may hold on a given server version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceLimits {
    /// Devices in a slice.
    pub max_devices: usize,
    /// Devices in a slice where any device has taints (or, where
    /// `counters_lower_device_limit`, consumes counters).
    pub max_devices_with_taints_or_counters: usize,
    /// Whether consuming counters lowers the device limit as taints do.
    pub counters_lower_device_limit: bool,
    /// Counter sets in a slice, if limited by count.
    pub max_counter_sets_per_slice: Option<usize>,
    /// Counters in all the counter sets of a slice, if limited by sum.
    pub max_counters_per_slice: Option<usize>,
    /// Counters in one counter set.
    pub max_counters_per_set: usize,
    /// Counter consumptions (sets consumed from) per device, if limited.
    pub max_consumptions_per_device: Option<usize>,
    /// Counters in one consumption.
    pub max_counters_per_consumption: usize,
    /// Counters consumed by one device over all its consumptions, if limited.
    pub max_consumed_counters_per_device: Option<usize>,
    /// Counters consumed by all the devices of a slice, if limited.
    pub max_consumed_counters_per_slice: Option<usize>,
    /// Taints per device.
    pub max_taints_per_device: usize,
    /// Whether a taint may have the effect `None` (1.35 and later).
    pub taint_effect_none: bool,
}

impl SliceLimits {
    /// The device limit of a slice holding devices with `taints` and
    /// `counters` (whether any device has taints, consumes counters).
    pub fn device_limit(&self, taints: bool, counters: bool) -> usize {
        if taints || (counters && self.counters_lower_device_limit) {
            self.max_devices_with_taints_or_counters
        } else {
            self.max_devices
        }
    }
}

#[cfg(test)]
#[path = "version_tests.rs"]
mod tests;
