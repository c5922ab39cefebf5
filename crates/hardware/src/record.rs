//! Recording a node's hardware into a snapshot tree: the parts of `/sys`,
//! `/dev` and `/proc` that discovery reads for the selected candidates (and
//! the driver descriptions that tell administrative nodes apart),
//! laid out as on the node, so the snapshot can serve as a `--host-root`
//! anywhere (tests, `wasm-device-plugin test`, a bug report).
//!
//! Attribute files are copied up to [`ATTRIBUTE_SIZE_LIMIT`] bytes; binary
//! blobs (`config`, `resource*`, `rom`) are skipped; symlinks are copied as
//! links, and the directories they point to are created so nothing
//! dangles. Device nodes become empty regular files (their type and numbers
//! come from sysfs where the kernel gives them).

use std::fs;
use std::path::{Component, Path, PathBuf};

use crate::access::ATTRIBUTE_SIZE_LIMIT;
use crate::candidate::Candidate;
use crate::error::HardwareError;
use crate::root::HostRoot;

/// What a recording wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    /// Regular files copied (sysfs attributes, NUMA and driver information).
    pub files: usize,
    /// Symbolic links recreated (sysfs's links between devices and buses).
    pub links: usize,
    /// Device nodes stood in for by empty regular files.
    pub nodes: usize,
}

/// Files in a device's sysfs directory that are never recorded.
const SKIPPED: &[&str] = &["config", "rom", "remove", "rescan", "reset", "vpd"];

fn io(path: &Path, source: std::io::Error) -> HardwareError {
    HardwareError::Io {
        path: path.to_owned(),
        source,
    }
}

struct Recorder<'a> {
    root: &'a HostRoot,
    dest: HostRoot,
    summary: RecordSummary,
}

impl Recorder<'_> {
    fn mkdir(&self, host: &Path) -> Result<(), HardwareError> {
        let target = self.dest.resolve(host);
        fs::create_dir_all(&target).map_err(|e| io(&target, e))
    }

    /// Copies a small regular file (host path) if readable.
    fn file(&mut self, host: &Path) -> Result<(), HardwareError> {
        let source = self.root.resolve(host);
        let Ok(meta) = fs::metadata(&source) else {
            return Ok(());
        };
        if !meta.is_file() || meta.len() > ATTRIBUTE_SIZE_LIMIT as u64 {
            return Ok(());
        }
        // Write-only or unreadable attributes are left out.
        let Ok(bytes) = fs::read(&source) else {
            return Ok(());
        };
        if bytes.len() > ATTRIBUTE_SIZE_LIMIT {
            return Ok(());
        }
        let target = self.dest.resolve(host);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        fs::write(&target, bytes).map_err(|e| io(&target, e))?;
        self.summary.files += 1;
        Ok(())
    }

    /// Copies a symlink (host path) as is and creates its target directory.
    fn link(&mut self, host: &Path) -> Result<(), HardwareError> {
        let source = self.root.resolve(host);
        let Ok(target) = fs::read_link(&source) else {
            return Ok(());
        };
        let link = self.dest.resolve(host);
        if let Some(parent) = link.parent() {
            fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).map_err(|e| io(&link, e))?;
        self.summary.links += 1;
        // Create what it points at (as a directory) so it does not dangle.
        let pointed = if target.is_absolute() {
            target.clone()
        } else {
            host.parent().unwrap_or(Path::new("/")).join(&target)
        };
        let pointed = normalize(&pointed);
        if !self.dest.resolve(&pointed).exists() && self.root.resolve(&pointed).is_dir() {
            self.mkdir(&pointed)?;
        }
        Ok(())
    }

    /// Copies a device's sysfs directory: attributes, links, and one level
    /// of class subdirectories (`drm/renderD128/dev`, `net/eth0`, …).
    fn device_dir(&mut self, host: &Path, depth: usize) -> Result<(), HardwareError> {
        self.mkdir(host)?;
        let Ok(entries) = fs::read_dir(self.root.resolve(host)) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name_str = name.to_string_lossy();
            if SKIPPED.contains(&name_str.as_ref()) || name_str.starts_with("resource") {
                continue;
            }
            let child = host.join(&name);
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                self.link(&child)?;
            } else if kind.is_file() {
                self.file(&child)?;
            } else if kind.is_dir() && depth < 2 && !name_str.starts_with("power") {
                self.device_dir(&child, depth + 1)?;
            }
        }
        Ok(())
    }
}

/// Lexically resolves `.` and `..` in a host path.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            _ => {}
        }
    }
    out
}

/// Records `candidates` (as discovered beneath `root`) into the tree at
/// `dest`, plus the NUMA topology, the NVIDIA driver's GPU information and
/// what the drivers say their nodes are (`/proc/devices`, NVIDIA's
/// administrative capability files) where present.
pub fn record(
    root: &HostRoot,
    candidates: &[Candidate],
    dest: &Path,
) -> Result<RecordSummary, HardwareError> {
    fs::create_dir_all(dest).map_err(|e| io(dest, e))?;
    let mut recorder = Recorder {
        root,
        dest: HostRoot::new(dest),
        summary: RecordSummary::default(),
    };
    for candidate in candidates {
        if let Some(dir) = &candidate.sysfs_dir {
            recorder.device_dir(dir, 0)?;
            // Locality facts inherited from parents (a USB device's NUMA
            // node is its host controller's).
            for ancestor in dir.ancestors().skip(1) {
                if ancestor == Path::new("/sys/devices") || ancestor == Path::new("/") {
                    break;
                }
                recorder.file(&ancestor.join("numa_node"))?;
                recorder.file(&ancestor.join("local_cpulist"))?;
            }
            // The bus entry that names the device (`/sys/bus/pci/devices/<id>`).
            let bus = match candidate.kind {
                crate::candidate::CandidateKind::Pci => Some("/sys/bus/pci/devices"),
                crate::candidate::CandidateKind::Usb => Some("/sys/bus/usb/devices"),
                crate::candidate::CandidateKind::Node => None,
            };
            if let Some(bus) = bus {
                recorder.link(&Path::new(bus).join(&candidate.id))?;
            }
            let nvidia = Path::new("/proc/driver/nvidia/gpus")
                .join(&candidate.id)
                .join("information");
            recorder.file(&nvidia)?;
        }
        for node in &candidate.nodes {
            let target = recorder.dest.resolve(&node.path);
            if let Some(parent) = target.parent() {
                fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            }
            if !target.exists() {
                fs::write(&target, b"").map_err(|e| io(&target, e))?;
                recorder.summary.nodes += 1;
            }
            if node.major != 0 || node.minor != 0 {
                let kind = if node.node_type == crate::candidate::NodeType::Block {
                    "block"
                } else {
                    "char"
                };
                let class = Path::new("/sys/dev")
                    .join(kind)
                    .join(format!("{}:{}", node.major, node.minor));
                if root.resolve(&class).is_symlink() {
                    recorder.link(&class)?;
                    let real = normalize(
                        &class
                            .parent()
                            .unwrap()
                            .join(fs::read_link(root.resolve(&class)).unwrap_or_default()),
                    );
                    recorder.file(&real.join("dev"))?;
                    recorder.file(&real.join("uevent"))?;
                }
            }
        }
    }
    // NUMA topology.
    let nodes = Path::new("/sys/devices/system/node");
    recorder.file(&nodes.join("online"))?;
    recorder.file(&nodes.join("possible"))?;
    if let Ok(entries) = fs::read_dir(root.resolve(nodes)) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with("node") {
                recorder.file(&nodes.join(&name).join("cpulist"))?;
            }
        }
    }
    // What the drivers say their nodes are, for judging administrative
    // nodes on the snapshot as on the node (`AdminNodes`).
    recorder.file(Path::new("/proc/devices"))?;
    for file in crate::AdminNodeKind::nvidia_capability_files() {
        recorder.file(Path::new(file))?;
    }
    Ok(recorder.summary)
}
