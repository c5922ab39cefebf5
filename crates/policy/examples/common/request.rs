//! The request both scorer benchmarks send: shaped like the host's.

use wdp_policy::{DeviceNode, DeviceRef, NodeType, PreferredRequest};

/// A request like the host builds one: `n` devices on two NUMA nodes,
/// eight to a PCI switch, with the attributes the hardware layer reports.
pub fn request(n: usize) -> PreferredRequest {
    let available = (0..n)
        .map(|i| {
            let bus = 0x10 + i;
            let address = format!("0000:{:02x}:{:02x}.0", bus / 32, bus % 32);
            let numa = (i * 2 / n.max(1)) as i64;
            // Root port, switch upstream port, then one downstream port
            // per device, as behind a real PCIe switch.
            let switch = format!(
                "/sys/devices/pci0000:{:02x}/0000:{:02x}:01.0/0000:{:02x}:00.0",
                i / 8,
                i / 8,
                0x40 + i / 8
            );
            let attributes = vec![
                ("pci.address".to_string(), address.clone()),
                ("pci.vendor".to_string(), "0x10de".to_string()),
                ("pci.device".to_string(), "0x2330".to_string()),
                ("pci.class".to_string(), "0x030200".to_string()),
                ("pci.driver".to_string(), "nvidia".to_string()),
                ("pci.numa-node".to_string(), numa.to_string()),
                (
                    "pci.path".to_string(),
                    format!(
                        "{switch}/0000:{:02x}:{:02x}.0/{address}",
                        0x80 + i / 8,
                        i % 8
                    ),
                ),
            ];
            DeviceRef {
                id: address.clone(),
                device_id: address,
                numa_nodes: vec![numa],
                attributes,
                nodes: vec![DeviceNode {
                    path: format!("/dev/nvidia{i}"),
                    node_type: NodeType::Char,
                    major: 195,
                    minor: i as u32,
                }],
            }
        })
        .collect::<Vec<_>>();
    let must_include = vec![available[n / 2].id.clone()];
    PreferredRequest {
        available,
        must_include,
        size: (n / 4).max(1) as u32,
    }
}
