//! The bus-independent shapes discovery reports.

use std::path::PathBuf;

use crate::attributes::Attributes;

/// Kind of a device node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeType {
    /// A character device.
    Char,
    /// A block device.
    Block,
    /// Anything else, including a fixture's stand-in file whose numbers sysfs
    /// does not give (see [`crate::nodes`] for the rule).
    Other,
}

impl NodeType {
    /// `"char"`, `"block"` or `"other"` (the `node.type` attribute value).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeType::Char => "char",
            NodeType::Block => "block",
            NodeType::Other => "other",
        }
    }
}

/// One device node, by host path, with its type and device numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct DeviceNode {
    /// Host path (root stripped), e.g. `/dev/dri/renderD128`.
    pub path: PathBuf,
    /// Char, block or other.
    pub node_type: NodeType,
    /// Linux major number (0 when unknown).
    pub major: u32,
    /// Linux minor number (0 when unknown).
    pub minor: u32,
}

/// Which discovery path produced a [`Candidate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CandidateKind {
    /// A PCI function from `/sys/bus/pci/devices`.
    Pci,
    /// A USB device from `/sys/bus/usb/devices`.
    Usb,
    /// A device node matched by a node path/glob.
    Node,
}

/// One piece of hardware that matched a selector, in a shape independent of its bus.
///
/// # Attributes
///
/// Facts are strings under dotted keys; a fact that sysfs does not give (or
/// gives in a form that does not parse) is absent, never empty. Hex IDs are
/// lowercase with `0x` (`0x10de`); PCI classes have 6 digits (`0x030200`).
///
/// PCI (`kind == Pci`):
///
/// | key | source |
/// |---|---|
/// | `pci.address` | the function's address, `0000:3b:00.0` (same as `id`) |
/// | `pci.vendor`, `pci.device` | `vendor`, `device` |
/// | `pci.subsystem-vendor`, `pci.subsystem-device` | `subsystem_vendor`, `subsystem_device` |
/// | `pci.class` | `class` |
/// | `pci.numa-node` | `numa_node` when ≥ 0 |
/// | `pci.driver` | basename of the `driver` link |
/// | `pci.iommu-group` | basename of the `iommu_group` link |
/// | `pci.physfn` | address the `physfn` link names (on a VF) |
/// | `pci.vf-index` | N of the PF's `virtfnN` link naming this VF (when the PF was scanned too) |
/// | `pci.virtfns` | comma-separated VF addresses of the `virtfnN` links, in N order (on a PF) |
/// | `pci.sriov-totalvfs`, `pci.sriov-numvfs` | `sriov_totalvfs`, `sriov_numvfs` |
/// | `pci.link-speed`, `pci.link-width` | `current_link_speed`, `current_link_width` |
/// | `pci.max-link-speed`, `pci.max-link-width` | `max_link_speed`, `max_link_width` |
/// | `pci.local-cpus` | `local_cpulist` |
/// | `pci.path` | host path of the function's directory under `/sys/devices` (shows the bridge/switch hierarchy) |
/// | `pci.net` | comma-separated network interface names under `net/` |
/// | `nvidia.minor` | `Device Minor` from `/proc/driver/nvidia/gpus/<address>/information` |
/// | `nvidia.uuid` | `GPU UUID` from the same file (`GPU-…`), when present |
///
/// USB (`kind == Usb`):
///
/// | key | source |
/// |---|---|
/// | `usb.port` | the port path, `1-1.2` (same as `id`; `usbN` for a root hub) |
/// | `usb.vendor`, `usb.product` | `idVendor`, `idProduct` |
/// | `usb.serial` | `serial` |
/// | `usb.busnum`, `usb.devnum` | `busnum`, `devnum` (decimal) |
/// | `usb.manufacturer`, `usb.product-name` | `manufacturer`, `product` strings |
/// | `usb.speed` | `speed` (Mbit/s) |
/// | `usb.device-class` | `bDeviceClass` |
/// | `usb.numa-node` | `numa_node` of the nearest ancestor (the host controller) when ≥ 0 |
/// | `usb.path` | host path of the device's directory under `/sys/devices` |
///
/// Device nodes (`kind == Node`; type and numbers are in `nodes[0]`):
///
/// | key | value |
/// |---|---|
/// | `node.path` | the node's host path |
/// | `node.target` | host path the node's symlink finally points to (only when the path is a symlink) |
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Candidate {
    /// PCI address `0000:3b:00.0`; USB port path `1-1.2`; for a node, its path
    /// without `/dev/`, `/` replaced by `-` (`/dev/net/tun` → `net-tun`).
    pub id: String,
    /// Bus the candidate came from.
    pub kind: CandidateKind,
    /// NUMA nodes the device is local to; empty when unknown.
    pub numa_nodes: Vec<i64>,
    /// Facts, see the table above (a compact sorted map).
    pub attributes: Attributes,
    /// Device nodes this candidate maps to (only nodes that exist under the root).
    pub nodes: Vec<DeviceNode>,
    /// Host path of the device's sysfs directory (under `/sys/devices`), the
    /// base for [`crate::read_attribute`] / [`crate::write_attribute`].
    pub sysfs_dir: Option<PathBuf>,
}

impl Candidate {
    /// The attribute `key`, if present.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key)
    }
}

/// Result of one scan: the candidates plus warnings naming the odd paths that were skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Scan {
    /// What was found, sorted by id, unique by id.
    pub candidates: Vec<Candidate>,
    /// One line per odd entry (missing file, unparsable value, dangling
    /// link …), each naming the host path at fault.
    pub warnings: Vec<String>,
}
