//! Plain Rust mirrors of the WIT records of `wasm-device-plugin:policy`.
//!
//! Each type matches its WIT record field by field (attributes as
//! `Vec<(String, String)>`, paths as `String`). They derive wasmtime's
//! component-model traits so the runtime hands them to a guest and takes them
//! back without any intermediate copy; the host never sees generated binding
//! types.

use wasmtime::component::{ComponentType, Lift, Lower};

/// `types.attributes`: free-form facts, e.g. `("pci.vendor", "0x10de")`.
pub type Attributes = Vec<(String, String)>;

/// `types.candidate-kind`: what kind of hardware a candidate is.
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[component(enum)]
#[repr(u8)]
pub enum CandidateKind {
    /// A PCI function under `/sys/bus/pci/devices`.
    #[default]
    #[component(name = "pci")]
    Pci,
    /// A USB device under `/sys/bus/usb/devices`.
    #[component(name = "usb")]
    Usb,
    /// A bare device node matched by a path or glob under `/dev`.
    #[component(name = "node")]
    Node,
}

/// `types.node-type`: character or block device.
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[component(enum)]
#[repr(u8)]
pub enum NodeType {
    /// A character device.
    #[default]
    #[component(name = "char")]
    Char,
    /// A block device.
    #[component(name = "block")]
    Block,
    /// Anything else.
    #[component(name = "other")]
    Other,
}

/// `types.device-node`: a device node, path as seen on the host.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceNode {
    /// Host path, e.g. `/dev/nvidia0` (never prefixed by the host root).
    pub path: String,
    /// Character, block or other.
    #[component(name = "node-type")]
    pub node_type: NodeType,
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// `types.candidate`: a piece of hardware that matched the selectors.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Candidate {
    /// Stable host-chosen name (PCI address, USB port path, node name).
    pub id: String,
    /// PCI, USB or device node.
    pub kind: CandidateKind,
    /// False when the hardware was seen before but is gone now.
    pub present: bool,
    /// NUMA nodes the hardware is local to; empty when unknown.
    #[component(name = "numa-nodes")]
    pub numa_nodes: Vec<i64>,
    /// Facts read from sysfs.
    pub attributes: Attributes,
    /// Device nodes that give access to the hardware.
    pub nodes: Vec<DeviceNode>,
}

/// `types.device`: a device the resource advertises.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Device {
    /// At most 63 characters, unique in the resource.
    pub id: String,
    /// IDs of the candidates this device is made of.
    pub candidates: Vec<String>,
    /// NUMA nodes.
    #[component(name = "numa-nodes")]
    pub numa_nodes: Vec<i64>,
    /// Facts about the device.
    pub attributes: Attributes,
    /// How many times the device may be handed out at once; 0 means 1.
    pub replicas: u32,
}

/// `types.device-ref`: one device ID as the kubelet sees it.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceRef {
    /// The ID the kubelet uses (a replica ID when shared).
    pub id: String,
    /// The advertised device it belongs to.
    #[component(name = "device-id")]
    pub device_id: String,
    /// NUMA nodes.
    #[component(name = "numa-nodes")]
    pub numa_nodes: Vec<i64>,
    /// Facts about the device.
    pub attributes: Attributes,
    /// Device nodes of the device's candidates.
    pub nodes: Vec<DeviceNode>,
}

/// `health.device-facts`: a device with the current state of its candidates.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceFacts {
    /// The advertised device.
    pub device: Device,
    /// Its candidates, freshly read.
    pub candidates: Vec<Candidate>,
}

/// `health.verdict`: the verdict for one device.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Verdict {
    /// A device ID from the input (not a replica ID).
    pub id: String,
    /// Whether the device may be handed out.
    pub healthy: bool,
    /// Why.
    pub reason: String,
}

/// `preferred-allocation.request`.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct PreferredRequest {
    /// Devices the kubelet may hand out.
    pub available: Vec<DeviceRef>,
    /// IDs that must be part of the answer.
    #[component(name = "must-include")]
    pub must_include: Vec<String>,
    /// Exactly how many IDs to answer.
    pub size: u32,
}

/// `allocate.mount`.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Mount {
    /// Path inside the container.
    #[component(name = "container-path")]
    pub container_path: String,
    /// Path on the host.
    #[component(name = "host-path")]
    pub host_path: String,
    /// Mounted read-only.
    #[component(name = "read-only")]
    pub read_only: bool,
}

/// `allocate.device-spec`.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceSpec {
    /// Path inside the container.
    #[component(name = "container-path")]
    pub container_path: String,
    /// Path on the host.
    #[component(name = "host-path")]
    pub host_path: String,
    /// Any of `r`, `w`, `m`.
    pub permissions: String,
}

/// `allocate.container-response`: what one container receives.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct ContainerResponse {
    /// Environment variables.
    pub envs: Vec<(String, String)>,
    /// Mounts.
    pub mounts: Vec<Mount>,
    /// Device specs.
    pub devices: Vec<DeviceSpec>,
    /// Annotations.
    pub annotations: Vec<(String, String)>,
    /// Fully qualified CDI device names.
    #[component(name = "cdi-devices")]
    pub cdi_devices: Vec<String>,
}

/// `types.quantity`: a Kubernetes quantity as text, e.g. `80Gi`, `7` or
/// `500m` (WIT 0.1.2).
pub type Quantity = String;

/// `types.taint-effect`: what a DRA device taint does to claims that do
/// not tolerate it (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[component(enum)]
#[repr(u8)]
pub enum TaintEffect {
    /// No new allocation of the device.
    #[default]
    #[component(name = "no-schedule")]
    NoSchedule,
    /// No new allocation, and pods using the device are evicted.
    #[component(name = "no-execute")]
    NoExecute,
}

/// `types.device-taint`: a DRA device taint (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceTaint {
    /// A label key, `[prefix/]name`; an unqualified name is qualified with
    /// the driver's name.
    pub key: String,
    /// A label value, possibly empty.
    pub value: String,
    /// What the taint does.
    pub effect: TaintEffect,
}

/// `types.claim-device`: one device of the claim being prepared, as the
/// driver's allocation result names it (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct ClaimDevice {
    /// The device's ID: an advertised device's, or a partition's.
    pub id: String,
    /// The advertised device it is (equal to `id`) or is part of (a
    /// partition's parent).
    #[component(name = "device-id")]
    pub device_id: String,
    /// Whether `id` is a partition rather than a whole device.
    pub partition: bool,
    /// The claim's request the device serves, e.g. `gpu` or `gpus/large`.
    pub request: String,
    /// Admin access: the device is not taken away from other claims.
    #[component(name = "admin-access")]
    pub admin_access: bool,
    /// Capacity this allocation consumes of a shared device, e.g.
    /// `("memory", "10Gi")`; empty otherwise.
    #[component(name = "consumed-capacity")]
    pub consumed_capacity: Vec<(String, Quantity)>,
    /// The share's ID when the device is allocated to several claims.
    #[component(name = "share-id")]
    pub share_id: Option<String>,
}

/// `types.device-condition`: a condition of a prepared device, as
/// Kubernetes writes conditions (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceCondition {
    /// The condition's type (WIT `%type`), e.g. `Ready`.
    #[component(name = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// One CamelCase word, e.g. `PartitionCreated`.
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

/// `types.network-data`: network facts of a prepared device (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct NetworkData {
    /// The interface's name.
    #[component(name = "interface-name")]
    pub interface_name: String,
    /// Addresses in CIDR notation, e.g. `192.0.2.5/24`.
    pub ips: Vec<String>,
    /// E.g. a MAC address.
    #[component(name = "hardware-address")]
    pub hardware_address: String,
}

/// `types.device-status`: what a prepared device reports into the claim's
/// `status.devices` (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceStatus {
    /// A [`ClaimDevice::id`] of the call.
    pub id: String,
    /// At most 8.
    pub conditions: Vec<DeviceCondition>,
    /// Driver-specific JSON, at most 10 KiB.
    pub data: Option<String>,
    /// Network facts, for a NIC or one of its VFs.
    pub network: Option<NetworkData>,
}

/// `dra-layout.counter`: a named amount (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Counter {
    /// A DNS label, e.g. `memory`.
    pub name: String,
    /// The amount.
    pub value: Quantity,
}

/// `dra-layout.counter-set`: counters that partitions draw on, e.g.
/// `gpu-0000-3b-00-0` with `memory = 80Gi` and `slices = 7` (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct CounterSet {
    /// A DNS label.
    pub name: String,
    /// What the set holds.
    pub counters: Vec<Counter>,
}

/// `dra-layout.counter-consumption`: what a device takes from one counter
/// set while it is allocated (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct CounterConsumption {
    /// The [`CounterSet::name`] it draws on.
    #[component(name = "counter-set")]
    pub counter_set: String,
    /// The amounts taken.
    pub counters: Vec<Counter>,
}

/// `dra-layout.capacity-range`: amounts a claim may ask of a capacity
/// (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct CapacityRange {
    /// The smallest amount.
    pub min: Quantity,
    /// The largest amount, if bounded.
    pub max: Option<Quantity>,
    /// The step between amounts, if any.
    pub step: Option<Quantity>,
}

/// `dra-layout.request-policy`: how claims consume a capacity of a device
/// that allows multiple allocations (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct RequestPolicy {
    /// What a request that names no amount consumes.
    pub default: Option<Quantity>,
    /// The amounts a request may take (ascending, at most 10), or empty.
    #[component(name = "valid-values")]
    pub valid_values: Vec<Quantity>,
    /// The range a request may take.
    #[component(name = "valid-range")]
    pub valid_range: Option<CapacityRange>,
}

/// `dra-layout.capacity`: a capacity of a device, e.g. `("memory", "80Gi")`
/// (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Capacity {
    /// The capacity's name.
    pub name: String,
    /// How much there is.
    pub value: Quantity,
    /// How claims consume it, when the device allows multiple allocations.
    #[component(name = "request-policy")]
    pub request_policy: Option<RequestPolicy>,
}

/// `dra-layout.device-layout`: DRA facts of one advertised device
/// (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceLayout {
    /// The advertised device's ID.
    pub id: String,
    /// What the whole device takes from counter sets while allocated.
    #[component(name = "consumes-counters")]
    pub consumes_counters: Vec<CounterConsumption>,
    /// Its capacities.
    pub capacity: Vec<Capacity>,
    /// Several claims may be allocated the device at once, each consuming
    /// part of its capacity.
    #[component(name = "allow-multiple-allocations")]
    pub allow_multiple_allocations: bool,
}

/// `dra-layout.partition`: a device of its own in the ResourceSlice, made
/// of part of an advertised device (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Partition {
    /// Unique among the resource's devices and partitions; at most 63
    /// characters.
    pub id: String,
    /// The advertised device it is part of.
    pub parent: String,
    /// Facts about the partition.
    pub attributes: Attributes,
    /// What it takes from counter sets while allocated.
    #[component(name = "consumes-counters")]
    pub consumes_counters: Vec<CounterConsumption>,
    /// Its capacities.
    pub capacity: Vec<Capacity>,
}

/// `dra-layout.layout`: the DRA layout of a resource's devices (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Layout {
    /// Counter sets partitions draw on.
    #[component(name = "counter-sets")]
    pub counter_sets: Vec<CounterSet>,
    /// Facts of advertised devices; those not named are published with no
    /// counters or capacity.
    pub devices: Vec<DeviceLayout>,
    /// Partitions of advertised devices.
    pub partitions: Vec<Partition>,
}

/// `device-taints.tainted`: the taints of one device (WIT 0.1.2).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct Tainted {
    /// A device ID from the input.
    pub id: String,
    /// At most 4 taints per device, the health taint included.
    pub taints: Vec<DeviceTaint>,
}

/// `device-taints-v2.taint-effect`: what a taint does, with the `none`
/// effect of Kubernetes 1.35+ (WIT 0.1.3). The WIT 0.1.2 [`TaintEffect`]
/// converts into it.
#[derive(ComponentType, Lift, Lower, Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[component(enum)]
#[repr(u8)]
pub enum TaintEffectV2 {
    /// Nothing: the taint only informs (Kubernetes 1.35+).
    #[component(name = "none")]
    None,
    /// No new allocation of the device.
    #[default]
    #[component(name = "no-schedule")]
    NoSchedule,
    /// No new allocation, and pods using the device are evicted.
    #[component(name = "no-execute")]
    NoExecute,
}

impl From<TaintEffect> for TaintEffectV2 {
    fn from(effect: TaintEffect) -> Self {
        match effect {
            TaintEffect::NoSchedule => TaintEffectV2::NoSchedule,
            TaintEffect::NoExecute => TaintEffectV2::NoExecute,
        }
    }
}

/// `device-taints-v2.device-taint`: a DRA device taint whose effect may be
/// `none` (WIT 0.1.3). The WIT 0.1.2 [`DeviceTaint`] converts into it.
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct DeviceTaintV2 {
    /// A label key, `[prefix/]name`; an unqualified name is qualified with
    /// the driver's name.
    pub key: String,
    /// A label value, possibly empty.
    pub value: String,
    /// What the taint does.
    pub effect: TaintEffectV2,
}

impl From<DeviceTaint> for DeviceTaintV2 {
    fn from(taint: DeviceTaint) -> Self {
        Self {
            key: taint.key,
            value: taint.value,
            effect: taint.effect.into(),
        }
    }
}

/// `device-taints-v2.tainted`: the taints of one device (WIT 0.1.3).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct TaintedV2 {
    /// A device ID from the input.
    pub id: String,
    /// At most 16 taints per device, the health taint included (4 on a
    /// 1.34 API server).
    pub taints: Vec<DeviceTaintV2>,
}

impl From<Tainted> for TaintedV2 {
    fn from(tainted: Tainted) -> Self {
        Self {
            id: tainted.id,
            taints: tainted.taints.into_iter().map(Into::into).collect(),
        }
    }
}

/// `passthrough.pci-function`: one PCI function a bind would move
/// (WIT 0.1.3).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct PciFunction {
    /// E.g. `0000:17:00.0`.
    pub address: String,
    /// The kernel driver it is bound to now, if any.
    pub driver: Option<String>,
    /// `class`, `vendor` and `device` as sysfs gives them, e.g.
    /// `("class", "0x030200")`.
    pub attributes: Attributes,
}

/// `passthrough.bind-request`: a bind the host is about to make
/// (WIT 0.1.3).
#[derive(ComponentType, Lift, Lower, Clone, Debug, PartialEq, Eq, Default)]
#[component(record)]
pub struct BindRequest {
    /// The claim: `namespace/name`.
    pub claim: String,
    /// The claim's UID.
    #[component(name = "claim-uid")]
    pub claim_uid: String,
    /// The advertised device the claim was allocated.
    #[component(name = "device-id")]
    pub device_id: String,
    /// The driver the resource binds to, e.g. `vfio-pci`.
    pub driver: String,
    /// The IOMMU group, e.g. `42`.
    #[component(name = "iommu-group")]
    pub iommu_group: String,
    /// Every function of the group, the device's own included.
    pub functions: Vec<PciFunction>,
}
