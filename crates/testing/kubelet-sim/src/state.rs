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
    /// When the stream of this registration ended (the kubelet's endpoint
    /// stop time: its grace period runs from here).
    pub stopped_at: Option<Instant>,
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

    /// Whether the kubelet still keeps the endpoint: streaming, or
    /// stopped less than `grace` ago (the kubelet's
    /// `endpointStopGracePeriod`, 5 minutes).
    pub fn endpoint_kept(&self, grace: Duration) -> bool {
        self.stopped_at.is_none_or(|at| at.elapsed() < grace)
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
    /// Every pod admitted and not ended, by name (all in namespace
    /// `default`, one container each): what PodResources lists.
    pub pods: BTreeMap<String, SimPod>,
    /// How many pods were admitted (names pods `pod-<n>`).
    pub pods_admitted: u64,
    /// How long a stopped plugin's endpoint is kept (the kubelet's
    /// `endpointStopGracePeriod`); `None`: 5 minutes.
    pub endpoint_grace: Option<Duration>,
    /// Protocol mistakes the plugin made, in order.
    pub violations: Vec<String>,
    /// Registrations refused, with the reason.
    pub refusals: Vec<String>,
}

/// A pod the simulated kubelet runs: one container holding devices of
/// one resource through the device-plugin API.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPod {
    /// The container's name.
    pub container: String,
    /// The resource its devices are of.
    pub resource: String,
    /// The kubelet device IDs it holds.
    pub devices: Vec<String>,
    /// The `Allocate` answer it was created with, kept as the kubelet's
    /// checkpoint keeps it (what a restarting container gets again).
    pub response: ContainerAllocateResponse,
}

/// The kubelet's `endpointStopGracePeriod`.
pub const ENDPOINT_STOP_GRACE: Duration = Duration::from_secs(5 * 60);

impl SimState {
    /// The endpoint grace in force.
    pub fn endpoint_grace(&self) -> Duration {
        self.endpoint_grace.unwrap_or(ENDPOINT_STOP_GRACE)
    }

    /// What the Node's `status.allocatable` says of `resource`, as this
    /// kubelet would report it: the healthy devices of a streaming plugin,
    /// else 0; `None` when no plugin of it ever registered.
    pub fn allocatable(&self, resource: &str) -> Option<usize> {
        let record = self.plugins.get(resource)?;
        Some(match record.streaming {
            true => record.healthy_ids().len(),
            false => 0,
        })
    }

    /// What `status.capacity` says of `resource`: every device while the
    /// endpoint is kept, 0 after its grace (the key stays, as the kubelet
    /// keeps it); `None` when no plugin of it ever registered.
    pub fn capacity(&self, resource: &str) -> Option<usize> {
        let record = self.plugins.get(resource)?;
        Some(match record.endpoint_kept(self.endpoint_grace()) {
            true => record.devices.len(),
            false => 0,
        })
    }
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
    /// The pod that runs the container (see [`SimState::pods`]).
    pub pod: String,
}
