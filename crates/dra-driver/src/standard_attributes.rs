//! The Kubernetes standard device attributes (`resource.kubernetes.io/…`,
//! the names of k8s.io/dynamic-resource-allocation's `deviceattribute`
//! package) a device gets from its NUMA nodes and PCI facts. Every driver
//! that publishes them under these names lets one `matchAttribute`
//! constraint line up devices of different drivers: a GPU of ours and the
//! NIC of an SR-IOV driver on the same PCIe root, say.
//!
//! | attribute | type | from | when |
//! |---|---|---|---|
//! | [`NUMA_NODE`] | int | the device's NUMA nodes | exactly one (KEP-6072's scalar form, which needs no `DRAListTypeAttributes`) |
//! | [`PCIE_ROOT`] | string `pci<domain>:<bus>` | the root complex in the `pci.path` fact (`/sys/devices/pci0000:15/…` → `pci0000:15`) | the path names one |
//! | [`PCI_BUS_ID`] | string `<domain>:<bus>:<device>.<function>` | the `pci.address` fact | it is such an address |
//!
//! Discovery gives PCI devices both facts; a policy that renames or drops
//! them drops these attributes too. A value of another form is not
//! published under a standard name (it still is under the driver's own
//! domain, as every attribute is).

use wdp_dra_client::AttributeValue;
use wdp_policy::types as wit;

/// The domain of the standard attributes.
pub const STANDARD_PREFIX: &str = "resource.kubernetes.io/";
/// The NUMA node a device is local to.
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
/// The PCIe root complex a PCI device sits under, `pci<domain>:<bus>`.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// A PCI function's address in extended BDF notation, `0000:3b:00.0`.
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";

/// The fact holding a PCI function's address.
pub(crate) const PCI_ADDRESS_FACT: &str = "pci.address";
/// The fact holding a PCI function's directory under `/sys/devices`.
pub const PCI_PATH_FACT: &str = "pci.path";

/// The standard attributes of `device` (see the module docs), NUMA node
/// first.
pub fn standard_attributes(device: &wit::DeviceRef) -> Vec<(&'static str, AttributeValue)> {
    let fact = |key: &str| {
        device
            .attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, value)| value.as_str())
    };
    let mut attributes = Vec::new();
    if let [numa] = device.numa_nodes.as_slice() {
        attributes.push((NUMA_NODE, AttributeValue::Int(*numa)));
    }
    if let Some(root) = fact(PCI_PATH_FACT).and_then(pcie_root) {
        attributes.push((PCIE_ROOT, AttributeValue::String(root.to_owned())));
    }
    if let Some(address) = fact(PCI_ADDRESS_FACT).filter(|a| is_pci_address(a)) {
        attributes.push((PCI_BUS_ID, AttributeValue::String(address.to_owned())));
    }
    attributes
}

/// The root complex a sysfs device path runs through: its first component
/// of the form `pci<4 hex digits>:<2 hex digits>` (the kernel's name of a
/// PCI host bridge), wherever the path starts (under `/sys/devices`, or
/// below a platform or ACPI device as on some virtual machines).
pub fn pcie_root(path: &str) -> Option<&str> {
    path.split('/').find(|component| {
        component
            .strip_prefix("pci")
            .is_some_and(|rest| is_hex_pair(rest, 4, 2))
    })
}

/// Whether `address` is a PCI address in extended BDF notation:
/// `<4 hex>:<2 hex>:<2 hex>.<1 octal digit>`, lower-case as sysfs writes it.
pub fn is_pci_address(address: &str) -> bool {
    let Some((bus, slot)) = address.rsplit_once(':') else {
        return false;
    };
    let Some((device, function)) = slot.split_once('.') else {
        return false;
    };
    is_hex_pair(bus, 4, 2)
        && is_hex(device, 2)
        && function.len() == 1
        && function.bytes().all(|b| (b'0'..=b'7').contains(&b))
}

/// Whether `text` is `<first hex digits>:<second hex digits>`.
fn is_hex_pair(text: &str, first: usize, second: usize) -> bool {
    text.split_once(':')
        .is_some_and(|(a, b)| is_hex(a, first) && is_hex(b, second))
}

/// Whether `text` is `digits` lower-case hex digits.
fn is_hex(text: &str, digits: usize) -> bool {
    text.len() == digits
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
#[path = "standard_attributes_tests.rs"]
mod tests;
