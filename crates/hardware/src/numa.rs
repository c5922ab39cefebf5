//! NUMA nodes and their CPUs, from `/sys/devices/system/node`.

use std::path::Path;

use crate::root::HostRoot;
use crate::sysfs::read_trimmed;

/// Host path of the NUMA node directory.
pub const NODE_DIR: &str = "/sys/devices/system/node";

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NumaNode {
    /// Node number (`N` of `nodeN`).
    pub id: i64,
    /// Its CPUs as a Linux cpulist (`0-31,64-95`), as `nodeN/cpulist` says;
    /// empty for a memory-only node or when unreadable.
    pub cpus: String,
}

impl NumaNode {
    /// The CPU numbers of [`cpus`](Self::cpus) (empty when it does not parse).
    pub fn cpu_ids(&self) -> Vec<u32> {
        crate::sysfs::parse_cpulist(&self.cpus).unwrap_or_default()
    }
}

/// The machine's NUMA nodes, sorted by id; empty when the kernel shows none
/// (no `/sys/devices/system/node`).
pub fn numa_nodes(root: &HostRoot) -> Vec<NumaNode> {
    let dir = root.resolve(Path::new(NODE_DIR));
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut nodes: Vec<NumaNode> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let digits = name.strip_prefix("node")?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let id = digits.parse().ok()?;
            let cpus = read_trimmed(&e.path().join("cpulist")).unwrap_or_default();
            Some(NumaNode { id, cpus })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}
