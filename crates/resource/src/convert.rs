//! The few conversions the host still makes: hardware facts into the guest
//! model (the hardware crate knows nothing of Wasm). Devices and verdicts
//! are the guest model's types throughout the host; what a container
//! receives is a [`crate::grant::ContainerGrant`].

use wdp_hardware::{Candidate, CandidateKind, DeviceNode, NodeType};
use wdp_policy::types as guest;

/// A device node as guests see it (host path as a string).
pub(crate) fn guest_node(n: &DeviceNode) -> guest::DeviceNode {
    guest::DeviceNode {
        path: n.path.to_string_lossy().into_owned(),
        node_type: match n.node_type {
            NodeType::Char => guest::NodeType::Char,
            NodeType::Block => guest::NodeType::Block,
            NodeType::Other => guest::NodeType::Other,
        },
        major: n.major,
        minor: n.minor,
    }
}

/// A candidate as guests see it; `present` says whether its hardware is
/// there now.
pub(crate) fn guest_candidate(c: &Candidate, present: bool) -> guest::Candidate {
    guest::Candidate {
        id: c.id.clone(),
        kind: match c.kind {
            CandidateKind::Pci => guest::CandidateKind::Pci,
            CandidateKind::Usb => guest::CandidateKind::Usb,
            CandidateKind::Node => guest::CandidateKind::Node,
        },
        present,
        numa_nodes: c.numa_nodes.clone(),
        attributes: c
            .attributes
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        nodes: c.nodes.iter().map(guest_node).collect(),
    }
}
