//! Administrative device nodes: nodes a driver creates for managing the
//! hardware (partitioning a GPU, running the NVSwitch fabric, reading
//! physical memory) rather than for running work on it. A container that
//! holds one can change the node for every other tenant, so the host never
//! hands one out unless a resource opts in by name.
//!
//! A node is recognised by what the kernel and the driver say it is, not by
//! its path alone:
//! - its device numbers (`rdev`) against the drivers' registered names in
//!   `/proc/devices` (`nvidia-caps`, `nvidia-nvswitch`, `nvidia-nvlink`,
//!   `mem`, `cpu/msr`, `mei`);
//! - for NVIDIA capability nodes, the minor against the capability the
//!   driver describes (`/proc/driver/nvidia/capabilities/mig/config`,
//!   `mig/monitor`, `fabric-imex-mgmt`, and
//!   `/proc/driver/nvidia-nvlink/capabilities/fabric-mgmt`, each a file
//!   with a `DeviceFileMinor:` line). Per-MIG-instance capabilities
//!   (`gpuN/mig/giX/access`, `…/ciY/access`) are not administrative: they
//!   belong to the MIG device a partition publishes.
//!
//! Fixture trees and symlinks hide the numbers, so the driver's own names
//! are recognised too: `/dev/nvidia-caps/nvidia-cap<minor>` (the name
//! `nvidia-modprobe` gives minor `<minor>`), `/dev/nvidia-nvswitchctl`,
//! `/dev/nvidia-nvlink`, `/dev/mem`, `/dev/kmem`, `/dev/port`,
//! `/dev/cpu/<n>/msr` and `/dev/mei<n>`. A node matching either way is
//! administrative. Without the driver's capability files, the minors of
//! the driver's static capability table are assumed (0 `fabric-mgmt`, 1
//! `mig/config`, 2 `mig/monitor`, 4323 `fabric-imex-mgmt`).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::candidate::{DeviceNode, NodeType};
use crate::nodes::NodeResolver;
use crate::root::HostRoot;

/// The most entries [`AdminNodes::classify_tree`] reads below one mount.
pub const TREE_ENTRY_LIMIT: usize = 4096;

/// The kinds of administrative node the host knows. Each has a name, the
/// value a resource puts in `grant-admin-nodes` to hand it out on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdminNodeKind {
    /// NVIDIA `mig/config`: creates and destroys MIG instances on every GPU.
    NvidiaMigConfig,
    /// NVIDIA `mig/monitor`: reads every MIG instance of every GPU.
    NvidiaMigMonitor,
    /// NVIDIA NVLink `fabric-mgmt`: runs Fabric Manager without root.
    NvidiaFabricManagement,
    /// NVIDIA `fabric-imex-mgmt`: manages IMEX channels across a
    /// multi-node NVLink domain (the IMEX daemon's capability).
    NvidiaFabricImexManagement,
    /// `/dev/nvidia-nvswitchctl`: the NVSwitch control node the fabric
    /// manager drives.
    NvidiaNvswitchControl,
    /// `/dev/nvidia-nvlink`: the NVLink core's node, the fabric manager's.
    NvidiaNvlinkControl,
    /// `/dev/mem`, `/dev/kmem`, `/dev/port`: physical and kernel memory and
    /// I/O ports.
    KernelMemory,
    /// `/dev/cpu/<n>/msr`: model-specific registers of a CPU.
    CpuMsr,
    /// `/dev/mei<n>`: Intel's Management Engine interface (firmware
    /// management, AMT).
    IntelMei,
}

impl AdminNodeKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [AdminNodeKind; 9] = [
        AdminNodeKind::NvidiaMigConfig,
        AdminNodeKind::NvidiaMigMonitor,
        AdminNodeKind::NvidiaFabricManagement,
        AdminNodeKind::NvidiaFabricImexManagement,
        AdminNodeKind::NvidiaNvswitchControl,
        AdminNodeKind::NvidiaNvlinkControl,
        AdminNodeKind::KernelMemory,
        AdminNodeKind::CpuMsr,
        AdminNodeKind::IntelMei,
    ];

    /// The name a resource grants it by (`grant-admin-nodes`).
    pub fn name(self) -> &'static str {
        match self {
            AdminNodeKind::NvidiaMigConfig => "nvidia-mig-config",
            AdminNodeKind::NvidiaMigMonitor => "nvidia-mig-monitor",
            AdminNodeKind::NvidiaFabricManagement => "nvidia-fabric-mgmt",
            AdminNodeKind::NvidiaFabricImexManagement => "nvidia-fabric-imex-mgmt",
            AdminNodeKind::NvidiaNvswitchControl => "nvidia-nvswitch-control",
            AdminNodeKind::NvidiaNvlinkControl => "nvidia-nvlink-control",
            AdminNodeKind::KernelMemory => "kernel-memory",
            AdminNodeKind::CpuMsr => "cpu-msr",
            AdminNodeKind::IntelMei => "intel-mei",
        }
    }

    /// What holding it lets a container do, in a few words.
    pub fn grants(self) -> &'static str {
        match self {
            AdminNodeKind::NvidiaMigConfig => {
                "NVIDIA's MIG configuration capability: creates and destroys MIG instances on every GPU of the node"
            }
            AdminNodeKind::NvidiaMigMonitor => {
                "NVIDIA's MIG monitor capability: reads every MIG instance of every GPU of the node"
            }
            AdminNodeKind::NvidiaFabricManagement => {
                "NVIDIA's NVLink fabric management capability: runs Fabric Manager"
            }
            AdminNodeKind::NvidiaFabricImexManagement => {
                "NVIDIA's IMEX management capability: manages import/export channels of the NVLink domain"
            }
            AdminNodeKind::NvidiaNvswitchControl => {
                "the NVSwitch control node: programs the NVLink fabric of the node"
            }
            AdminNodeKind::NvidiaNvlinkControl => {
                "the NVLink core's node: trains and manages the node's NVLinks"
            }
            AdminNodeKind::KernelMemory => {
                "raw access to physical memory, kernel memory or I/O ports"
            }
            AdminNodeKind::CpuMsr => "a CPU's model-specific registers",
            AdminNodeKind::IntelMei => "Intel's Management Engine interface",
        }
    }

    /// The kind called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The file in which the NVIDIA driver describes this capability, and
    /// the minor its static capability table gives it, if it is one.
    fn nvidia_capability(self) -> Option<(&'static str, u32)> {
        match self {
            AdminNodeKind::NvidiaMigConfig => {
                Some(("/proc/driver/nvidia/capabilities/mig/config", 1))
            }
            AdminNodeKind::NvidiaMigMonitor => {
                Some(("/proc/driver/nvidia/capabilities/mig/monitor", 2))
            }
            AdminNodeKind::NvidiaFabricManagement => {
                Some(("/proc/driver/nvidia-nvlink/capabilities/fabric-mgmt", 0))
            }
            AdminNodeKind::NvidiaFabricImexManagement => {
                Some(("/proc/driver/nvidia/capabilities/fabric-imex-mgmt", 4323))
            }
            _ => None,
        }
    }

    /// The NVIDIA capability files, for the recorder.
    pub fn nvidia_capability_files() -> impl Iterator<Item = &'static str> {
        Self::ALL
            .into_iter()
            .filter_map(|k| k.nvidia_capability().map(|(file, _)| file))
    }
}

impl fmt::Display for AdminNodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A node found to be administrative, with how it was recognised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdminNode {
    /// The host path it was asked about.
    pub path: PathBuf,
    /// What it is.
    pub kind: AdminNodeKind,
    /// How it was recognised, as a clause ("char 508:1, the minor
    /// /proc/driver/nvidia/capabilities/mig/config gives").
    pub evidence: String,
}

impl fmt::Display for AdminNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {} ({}; {})",
            self.path.display(),
            self.kind.name(),
            self.kind.grants(),
            self.evidence
        )
    }
}

/// What the kernel and the drivers of one host say about device numbers:
/// read once ([`AdminNodes::read`]), then asked about any number of nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AdminNodes {
    /// Character majors by driver name, from `/proc/devices`.
    majors: BTreeMap<u32, String>,
    /// NVIDIA capability minors of the administrative capabilities, with
    /// the file that gives each.
    nvidia_caps: BTreeMap<u32, (AdminNodeKind, String)>,
}

impl AdminNodes {
    /// Reads `/proc/devices` and the NVIDIA capability files beneath
    /// `root`. What cannot be read is simply not known: a node is then
    /// judged by its driver-given name alone.
    pub fn read(root: &HostRoot) -> Self {
        let mut known = Self::default();
        if let Ok(text) = std::fs::read_to_string(root.resolve(Path::new("/proc/devices"))) {
            known.majors = parse_proc_devices(&text);
        }
        for kind in AdminNodeKind::ALL {
            let Some((file, _)) = kind.nvidia_capability() else {
                continue;
            };
            if let Ok(text) = std::fs::read_to_string(root.resolve(Path::new(file)))
                && let Some(minor) = device_file_minor(&text)
            {
                known.nvidia_caps.insert(minor, (kind, file.to_owned()));
            }
        }
        known
    }

    /// Whether the node at host path `path` beneath `root` is
    /// administrative: its numbers are read (symlinks followed within the
    /// root) and judged with [`Self::judge`]; a path that cannot be read is
    /// judged by its name alone.
    pub fn classify(&self, root: &HostRoot, path: &Path) -> Option<AdminNode> {
        let mut resolver = NodeResolver::new(root);
        match resolver.resolve(path, None) {
            Ok(Some(resolved)) => {
                let mut found = self.judge(&resolved.node);
                if found.is_none()
                    && let Some(target) = resolved.target
                {
                    found = self.judge(&DeviceNode {
                        path: target,
                        ..resolved.node.clone()
                    });
                }
                found.map(|mut n| {
                    n.path = path.to_path_buf();
                    n
                })
            }
            // A directory is not a node (a mount of one is judged by the
            // caller, entry by entry).
            Ok(None) => None,
            Err(_) => self.judge(&DeviceNode {
                path: path.to_path_buf(),
                node_type: NodeType::Other,
                major: 0,
                minor: 0,
            }),
        }
    }

    /// The administrative nodes a bind mount of host path `path` would
    /// expose: the node itself, or for a directory every node beneath it
    /// (symlinks not followed, at most [`TREE_ENTRY_LIMIT`] entries; a
    /// tree larger than that is reported as one unreadable finding so it
    /// is never waved through).
    pub fn classify_tree(&self, root: &HostRoot, path: &Path) -> Vec<AdminNode> {
        let real = root.resolve(path);
        let is_dir = std::fs::metadata(&real).is_ok_and(|m| m.is_dir());
        if !is_dir {
            return self.classify(root, path).into_iter().collect();
        }
        let mut found = Vec::new();
        let mut pending = vec![path.to_path_buf()];
        let mut seen = 0usize;
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(root.resolve(&dir)) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > TREE_ENTRY_LIMIT {
                    found.push(AdminNode {
                        path: path.to_path_buf(),
                        kind: AdminNodeKind::KernelMemory,
                        evidence: format!(
                            "a tree of more than {TREE_ENTRY_LIMIT} entries, too large to judge"
                        ),
                    });
                    return found;
                }
                let host = dir.join(entry.file_name());
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    pending.push(host);
                } else if let Some(admin) = self.classify(root, &host) {
                    found.push(admin);
                }
            }
        }
        found
    }

    /// Whether `node`, whose numbers are already known, is administrative:
    /// by its numbers first, then by its driver-given name.
    pub fn judge(&self, node: &DeviceNode) -> Option<AdminNode> {
        let found = |kind, evidence: String| {
            Some(AdminNode {
                path: node.path.clone(),
                kind,
                evidence,
            })
        };
        if node.node_type == NodeType::Char
            && let Some(driver) = self.majors.get(&node.major)
        {
            let numbers = format!("char {}:{}", node.major, node.minor);
            match (driver.as_str(), node.minor) {
                ("nvidia-caps", minor) => {
                    if let Some((kind, file)) = self.nvidia_caps.get(&minor) {
                        return found(
                            *kind,
                            format!("{numbers}: {driver} minor {minor}, the one {file} gives"),
                        );
                    }
                }
                ("nvidia-nvswitch", 255) => {
                    return found(
                        AdminNodeKind::NvidiaNvswitchControl,
                        format!("{numbers}: {driver} minor 255, its control node"),
                    );
                }
                ("nvidia-nvlink", _) => {
                    return found(
                        AdminNodeKind::NvidiaNvlinkControl,
                        format!("{numbers}: {driver}"),
                    );
                }
                ("mem", 1 | 2 | 4) => {
                    return found(
                        AdminNodeKind::KernelMemory,
                        format!("{numbers}: the kernel's mem, kmem or port"),
                    );
                }
                ("cpu/msr", _) => {
                    return found(AdminNodeKind::CpuMsr, format!("{numbers}: {driver}"));
                }
                ("mei", _) => {
                    return found(AdminNodeKind::IntelMei, format!("{numbers}: {driver}"));
                }
                _ => {}
            }
        }
        self.judge_name(&node.path)
            .and_then(|(kind, evidence)| found(kind, evidence))
    }

    /// The kind a driver-given node name says, with the clause saying so.
    fn judge_name(&self, path: &Path) -> Option<(AdminNodeKind, String)> {
        let text = path.to_str()?;
        if let Some(minor) = text
            .strip_prefix("/dev/nvidia-caps/nvidia-cap")
            .and_then(|n| n.parse::<u32>().ok())
        {
            if let Some((kind, file)) = self.nvidia_caps.get(&minor) {
                return Some((
                    *kind,
                    format!("nvidia-cap{minor} is capability minor {minor}, the one {file} gives"),
                ));
            }
            // Without the driver's files (a host root without /proc): the
            // minors of the driver's static capability table.
            if self.nvidia_caps.is_empty()
                && let Some((kind, file)) = AdminNodeKind::ALL.into_iter().find_map(|kind| {
                    let (file, fixed) = kind.nvidia_capability()?;
                    (fixed == minor).then_some((kind, file))
                })
            {
                return Some((
                    kind,
                    format!(
                        "nvidia-cap{minor} is the minor the driver's capability table gives {file} (no capability file readable)"
                    ),
                ));
            }
            return None;
        }
        let by_name = |kind| Some((kind, "its driver-given name".to_owned()));
        let name = path.file_name()?.to_str()?;
        let parent = path.parent()?.to_str()?;
        match (parent, name) {
            ("/dev", "nvidia-nvswitchctl") => by_name(AdminNodeKind::NvidiaNvswitchControl),
            ("/dev", "nvidia-nvlink") => by_name(AdminNodeKind::NvidiaNvlinkControl),
            ("/dev", "mem" | "kmem" | "port") => by_name(AdminNodeKind::KernelMemory),
            ("/dev", mei) if numbered(mei, "mei") => by_name(AdminNodeKind::IntelMei),
            (cpu, "msr")
                if cpu
                    .strip_prefix("/dev/cpu/")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                by_name(AdminNodeKind::CpuMsr)
            }
            _ => None,
        }
    }
}

/// `prefix` followed by one or more digits.
fn numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The character devices of `/proc/devices` (`<major> <name>` lines under
/// `Character devices:`, up to `Block devices:`).
fn parse_proc_devices(text: &str) -> BTreeMap<u32, String> {
    let mut majors = BTreeMap::new();
    let mut in_char = false;
    for line in text.lines() {
        let line = line.trim();
        if line.eq_ignore_ascii_case("Character devices:") {
            in_char = true;
            continue;
        }
        if line.ends_with("devices:") {
            in_char = false;
            continue;
        }
        if !in_char {
            continue;
        }
        if let Some((major, name)) = line.split_once(char::is_whitespace)
            && let Ok(major) = major.parse::<u32>()
        {
            majors.insert(major, name.trim().to_owned());
        }
    }
    majors
}

/// The `DeviceFileMinor: <n>` line of an NVIDIA capability file.
fn device_file_minor(text: &str) -> Option<u32> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == "DeviceFileMinor")
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

#[cfg(test)]
#[path = "admin_nodes_tests.rs"]
mod tests;
