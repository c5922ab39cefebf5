//! Companion nodes: device nodes every container receiving any device of a
//! resource also needs (control and UVM nodes, `/dev/kfd`, `/dev/vfio/vfio`)
//! but that are never devices themselves. Configured per resource with
//! `[[companion-nodes]]`; added by the host itself where the kernel makes it
//! unambiguous: a function bound to `vfio-pci` is unusable without the VFIO
//! container node `/dev/vfio/vfio`.

use wdp_hardware::{Candidate, CandidateKind, HostRoot, NodeSelector};
use wdp_policy::types::DeviceNode;

use crate::convert::guest_node;

/// The VFIO container node every VFIO group node needs.
pub(crate) const VFIO_CONTAINER: &str = "/dev/vfio/vfio";

/// The companions of a resource at one refresh.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Companions {
    /// The nodes found (host paths), in config order, without repeats.
    pub nodes: Vec<DeviceNode>,
    /// Required companions that are missing, each as a sentence.
    pub missing: Vec<String>,
}

/// The configured companions plus the ones the kernel implies for the
/// `present` candidates (`/dev/vfio/vfio` beside any `vfio-pci` function).
pub fn wanted(configured: &[NodeSelector], present: &[Candidate]) -> Vec<NodeSelector> {
    let vfio = present.iter().any(|c| {
        c.kind == CandidateKind::Pci
            && c.attributes
                .iter()
                .any(|(k, v)| k == "pci.driver" && v == "vfio-pci")
    });
    let mut wanted = configured.to_vec();
    if vfio && !wanted.iter().any(|c| c.path == VFIO_CONTAINER) {
        wanted.push(NodeSelector {
            path: VFIO_CONTAINER.to_owned(),
            optional: false,
        });
    }
    wanted
}

/// Finds the [`wanted`] companions under `root`.
pub(crate) fn resolve(
    root: &HostRoot,
    configured: &[NodeSelector],
    present: &[Candidate],
) -> Companions {
    let mut found = Companions::default();
    for companion in &wanted(configured, present) {
        match wdp_hardware::glob_nodes(root, &companion.path) {
            Ok(nodes) if !nodes.is_empty() => {
                for node in nodes.iter().map(guest_node) {
                    if !found.nodes.contains(&node) {
                        found.nodes.push(node);
                    }
                }
            }
            Ok(_) if companion.optional => {}
            Ok(_) => found
                .missing
                .push(format!("companion node {} is missing", companion.path)),
            Err(error) if companion.optional => {
                tracing::debug!(path = %companion.path, %error, "optional companion unreadable");
            }
            Err(error) => found.missing.push(format!(
                "companion node {} cannot be read: {error}",
                companion.path
            )),
        }
    }
    found
}
