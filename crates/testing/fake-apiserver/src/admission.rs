//! What a write's admission step knows about the server's configuration: the Kubernetes minor
//! version served (which `/version` reports and the validation follows) and the DRA feature
//! gates turned off. The store keeps one [`ServerConfig`] and builds an [`AdmissionPolicy`] from
//! it once per write; the kinds' admission steps read it.

use k8s_openapi::jiff::Timestamp;

/// The minor version served when a test does not choose one.
pub(crate) const DEFAULT_MINOR: u32 = 34;
/// The oldest minor version the fake can serve: `resource.k8s.io/v1` is served from 1.34 on.
pub(crate) const OLDEST_MINOR: u32 = 34;

/// DRA feature gates a test turned off; their fields are dropped from written ResourceSlices
/// unless the stored object already uses them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct DisabledGates {
    /// DRADeviceTaints off: `spec.devices[].taints` are dropped.
    pub(crate) device_taints: bool,
    /// DRAPartitionableDevices off: `sharedCounters`, `consumesCounters` and per-device node
    /// selection are dropped.
    pub(crate) partitionable_devices: bool,
    /// DRAConsumableCapacity off: `allowMultipleAllocations` and capacity `requestPolicy` are
    /// dropped.
    pub(crate) consumable_capacity: bool,
}

/// The server's configuration as tests set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServerConfig {
    /// The Kubernetes minor version served (`1.<minor>`).
    pub(crate) minor: u32,
    /// The feature gates turned off.
    pub(crate) disabled: DisabledGates,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            minor: DEFAULT_MINOR,
            disabled: DisabledGates::default(),
        }
    }
}

/// What the admission step needs to know about the server's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AdmissionPolicy {
    /// The served minor version.
    pub(crate) minor: u32,
    /// The feature gates turned off.
    pub(crate) disabled: DisabledGates,
    /// The time the server stamps on new taints.
    pub(crate) now: Timestamp,
}

impl AdmissionPolicy {
    /// The policy of `config` at `now`.
    pub(crate) fn new(config: ServerConfig, now: Timestamp) -> Self {
        Self {
            minor: config.minor,
            disabled: config.disabled,
            now,
        }
    }

    /// Whether the ResourceSlice rules of 1.35 and later apply: counter sets in slices of their
    /// own, shared by the whole pool (in 1.34 they sit next to the devices consuming them), 16
    /// taints per device (4), and 64 devices per slice when any has taints or consumes counters
    /// (128).
    pub(crate) fn rules_from_1_35(&self) -> bool {
        self.minor >= 35
    }
}
