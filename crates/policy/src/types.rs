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
