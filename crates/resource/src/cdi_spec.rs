//! A device-plugin resource's CDI spec, and the parts a DRA claim's spec
//! shares with it: the resource model (its configuration, device set and
//! companions) in `wdp-cdi`'s terms. Written by [`crate::Resource`] when the
//! resource's `cdi` key asks for it.

use wdp_cdi::{CdiHook, CdiMount, CdiNode, ContainerEdits, Device, Spec};
use wdp_config::{CdiEdits, ResourceConfig};
use wdp_policy::types::{DeviceNode, NodeType};

use crate::device_set::DeviceSet;

/// A device node as a CDI `deviceNodes` entry: type, major and minor
/// only where the kernel told them, with the resource's `permissions`.
pub fn cdi_node(node: &DeviceNode, permissions: &str) -> CdiNode {
    let known = node.major != 0 || node.minor != 0;
    let node_type = match node.node_type {
        NodeType::Char if known => Some("c"),
        NodeType::Block if known => Some("b"),
        _ => None,
    };
    CdiNode {
        path: node.path.clone(),
        host_path: None,
        node_type,
        major: node_type.map(|_| node.major),
        minor: node_type.map(|_| node.minor),
        permissions: permissions.to_owned(),
    }
}

/// The edits every container of a resource receives: its `[cdi-edits]`
/// and its companion nodes.
pub fn cdi_edits(edits: &CdiEdits, companions: &[DeviceNode], permissions: &str) -> ContainerEdits {
    ContainerEdits {
        env: edits.env.clone(),
        device_nodes: companions
            .iter()
            .map(|n| cdi_node(n, permissions))
            .collect(),
        mounts: edits
            .mounts
            .iter()
            .map(|m| CdiMount {
                host_path: m.host_path.clone(),
                container_path: m.container_path.clone(),
                options: m.options.clone(),
            })
            .collect(),
        hooks: edits
            .hooks
            .iter()
            .map(|h| CdiHook {
                hook_name: h.hook_name.clone(),
                path: h.path.clone(),
                args: h.args.clone(),
            })
            .collect(),
    }
}

/// The spec of a resource advertising `set`.
pub fn cdi_spec(config: &ResourceConfig, set: &DeviceSet) -> Spec {
    let devices: Vec<Device> = set
        .devices()
        .iter()
        .map(|d| Device {
            name: d.id().to_owned(),
            container_edits: ContainerEdits {
                device_nodes: d
                    .device
                    .nodes
                    .iter()
                    .map(|n| cdi_node(n, &config.permissions))
                    .collect(),
                ..ContainerEdits::default()
            },
        })
        .collect();
    let mut spec = Spec {
        cdi_version: "",
        kind: config.resource.clone(),
        devices,
        container_edits: cdi_edits(&config.cdi_edits, set.companions(), &config.permissions),
    };
    spec.cdi_version = wdp_cdi::minimum_version(&spec);
    spec
}
