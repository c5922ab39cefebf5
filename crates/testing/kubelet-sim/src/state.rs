//! What the device-plugin kubelet stand-in has seen: each registered
//! resource's record, the devices it handed out and the protocol mistakes
//! it noticed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use wdp_kubelet_api::v1beta1::{
    self, ContainerAllocateResponse, Device, DevicePluginOptions, RegisterRequest,
};

/// What the simulated kubelet knows about one registered resource.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginRecord {
    /// The most recent `RegisterRequest` accepted for the resource.
    pub registration: RegisterRequest,
    /// How many times the resource registered since the kubelet started.
    pub registrations: u64,
    /// When the last registration was accepted.
    pub registered_at: Instant,
    /// The last list received on `ListAndWatch` (all Unhealthy once the
    /// stream ended, as the kubelet does).
    pub devices: Vec<Device>,
    /// How many lists `ListAndWatch` delivered.
    pub lists_received: u64,
    /// Whether the `ListAndWatch` stream is open.
    pub streaming: bool,
    /// Identifies this registration's stream, so a stream of an earlier
    /// registration that ends late cannot touch this record.
    pub(crate) stream_id: u64,
}

impl PluginRecord {
    /// IDs of the devices currently reported `Healthy`.
    pub fn healthy_ids(&self) -> Vec<String> {
        self.devices
            .iter()
            .filter(|d| d.health == v1beta1::HEALTHY)
            .map(|d| d.id.clone())
            .collect()
    }

    pub(crate) fn options(&self) -> DevicePluginOptions {
        self.registration.options.unwrap_or_default()
    }
}

/// The kubelet's view of every plugin, published on a watch channel.
#[derive(Clone, Debug, Default)]
pub struct SimState {
    /// Every resource that registered, by resource name.
    pub plugins: BTreeMap<String, PluginRecord>,
    /// Device IDs handed out per resource by [`crate::SimKubelet::admit`].
    pub allocated: BTreeMap<String, BTreeSet<String>>,
    /// Protocol mistakes the plugin made, in order.
    pub violations: Vec<String>,
    /// Registrations refused, with the reason.
    pub refusals: Vec<String>,
}

/// One container admitted through the device-plugin RPCs.
#[derive(Clone, Debug)]
pub struct Admission {
    /// The plugin's `GetPreferredAllocation` answer, if it offers one.
    pub preferred: Option<Vec<String>>,
    /// The device IDs sent to `Allocate`.
    pub devices: Vec<String>,
    /// The plugin's `Allocate` answer for the container.
    pub response: ContainerAllocateResponse,
    /// Whether `PreStartContainer` was called (and succeeded).
    pub pre_started: bool,
    /// Round-trip time of each RPC, in call order.
    pub timings: Vec<(&'static str, Duration)>,
}
