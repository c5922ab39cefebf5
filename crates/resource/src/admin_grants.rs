//! Which administrative device nodes a resource may hand out: none, unless
//! its file grants the kind by name (`grant-admin-nodes =
//! ["nvidia-mig-monitor"]`). What is administrative is `wdp-hardware`'s
//! [`AdminNodes`] judgement (the drivers' own numbers and names); this
//! module applies it to what a container would receive: a resource's
//! companion nodes and its devices' nodes at every refresh (refused at
//! load and reload, left out while serving), and each guest answer at the
//! call (refused, naming the guest and hook through the guest-call path).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use wdp_hardware::{AdminNode, AdminNodeKind, AdminNodes, Candidate, HostRoot, NodeType};
use wdp_policy::types::{Device, DeviceNode};

/// A resource's grants of administrative node kinds.
pub(crate) type Grants = BTreeSet<AdminNodeKind>;

/// The sentence refusing `found`, reached through `via` ("companion node",
/// "the answer's device", …), with the setting that would grant it.
pub(crate) fn refusal(via: &str, found: &AdminNode) -> String {
    format!(
        "{via} {found}: an administrative node is never handed to a container by default; \
         add \"{}\" to grant-admin-nodes to hand it out on purpose",
        found.kind.name()
    )
}

/// The first node of `nodes` (numbers known) that is administrative and
/// not granted.
pub(crate) fn first_refused<'a>(
    known: &AdminNodes,
    grants: &Grants,
    nodes: impl IntoIterator<Item = &'a DeviceNode>,
) -> Option<AdminNode> {
    nodes
        .into_iter()
        .filter_map(|node| known.judge(&hardware_node(node)))
        .find(|found| !grants.contains(&found.kind))
}

/// Administrative nodes (`known`) a resource does not grant, each with the sentence refusing it: a companion node (dropped
/// from `companions`, so no container and no CDI spec receives it) and the
/// devices whose candidates hold one (named, to be held back as
/// Unhealthy).
pub(crate) fn screen(
    known: &AdminNodes,
    grants: &Grants,
    present: &[Candidate],
    companions: &mut Vec<DeviceNode>,
    devices: &[Device],
) -> Vec<(Option<String>, String)> {
    let mut refused = Vec::new();
    companions.retain(|node| match first_refused(known, grants, [node]) {
        Some(found) => {
            refused.push((None, refusal("companion node", &found)));
            false
        }
        None => true,
    });
    let refused_candidates: HashMap<&str, String> = present
        .iter()
        .filter_map(|c| {
            let found = c
                .nodes
                .iter()
                .filter_map(|node| known.judge(node))
                .find(|found| !grants.contains(&found.kind))?;
            let via = format!("candidate {}'s node", c.id);
            Some((c.id.as_str(), refusal(&via, &found)))
        })
        .collect();
    if refused_candidates.is_empty() {
        return refused;
    }
    for device in devices {
        if let Some(reason) = device
            .candidates
            .iter()
            .find_map(|c| refused_candidates.get(c.as_str()))
        {
            refused.push((Some(device.id.clone()), reason.clone()));
        }
    }
    refused
}

/// Checks a guest's container answer, given as its device specs' and its
/// mounts' host paths: every device path that is not among `screened`
/// (paths the host already judged: the devices' and companions' nodes) and
/// every mount source (a directory entry by entry) must not be an
/// administrative node the resource does not grant. The host's facts are
/// read only when such a path shows.
pub(crate) fn check_answer<'a>(
    root: &HostRoot,
    grants: &Grants,
    screened: &HashSet<String>,
    device_paths: impl IntoIterator<Item = &'a str>,
    mount_sources: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    let mut known: Option<AdminNodes> = None;
    for path in device_paths {
        if screened.contains(path) {
            continue;
        }
        let facts = known.get_or_insert_with(|| AdminNodes::read(root));
        if let Some(found) = facts.classify(root, Path::new(path))
            && !grants.contains(&found.kind)
        {
            return Err(refusal("the answer's device", &found));
        }
    }
    for source in mount_sources {
        let facts = known.get_or_insert_with(|| AdminNodes::read(root));
        if let Some(found) = facts
            .classify_tree(root, Path::new(source))
            .into_iter()
            .find(|found| !grants.contains(&found.kind))
        {
            return Err(refusal(
                &format!("the answer's mount of {source}: its"),
                &found,
            ));
        }
    }
    Ok(())
}

/// The hardware crate's view of a guest-model node.
fn hardware_node(node: &DeviceNode) -> wdp_hardware::DeviceNode {
    use wdp_policy::types::NodeType as Guest;
    wdp_hardware::DeviceNode {
        path: node.path.clone().into(),
        node_type: match node.node_type {
            Guest::Char => NodeType::Char,
            Guest::Block => NodeType::Block,
            Guest::Other => NodeType::Other,
        },
        major: node.major,
        minor: node.minor,
    }
}

#[cfg(test)]
#[path = "admin_grants_tests.rs"]
mod tests;
