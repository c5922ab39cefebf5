//! PCI functions from `/sys/bus/pci/devices`.
//!
//! Each entry there is a symlink into `/sys/devices/pci…/…`; the function's
//! facts are read from that directory (see [`crate::Candidate`] for the
//! attribute keys). Odd entries never stop a scan:
//! - a name that is not a PCI address, a dangling link, or a missing or
//!   non-hex `vendor` skips the function, with a warning;
//! - a missing `device`/`class`, any unparsable value, a dangling `driver`,
//!   `iommu_group` or `physfn` link, and a `numa_node` of -1 on a machine
//!   with more than one NUMA node leave that fact out, with a warning;
//! - optional files that real hardware often lacks (link speed, SR-IOV,
//!   IOMMU group …) are silently absent.
//!
//! Device nodes a function maps to, reported only when they exist under the
//! root: `drm/card*` and `drm/renderD*` → `/dev/dri/<name>`;
//! `infiniband_verbs/<name>` → `/dev/infiniband/<name>`; `accel/<name>` →
//! `/dev/accel/<name>`; `vfio-dev/<name>` → `/dev/vfio/devices/<name>` (each
//! preferring the `DEVNAME` of the child's `uevent`, numbers from its
//! `MAJOR`/`MINOR`, else from its `dev` file);
//! a function bound to `vfio-pci` → `/dev/vfio/<iommu group>`; a function
//! bound to `nvidia` → `/dev/nvidia<minor>` from
//! `/proc/driver/nvidia/gpus/<address>/information`. Nodes shared by all
//! functions (`/dev/vfio/vfio`, `/dev/nvidiactl`, …) are left to node selectors.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::candidate::{Candidate, Scan};
use crate::fsat::{exists_at, names_of, open_dir, read_link_at, read_trimmed_at};
use crate::nodes::NodeResolver;
use crate::root::{HostRoot, link_target_host};
use crate::sysfs::parse_hex;

mod facts;
mod function;
mod nodes;
mod sriov;

pub(crate) use facts::PciFacts;

/// Host path of the PCI device list.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// True when `name` looks like a PCI address, `DDDD:BB:DD.F` (domain of 4 or
/// more hex digits).
pub fn is_pci_address(name: &str) -> bool {
    let Some((rest, func)) = name.rsplit_once('.') else {
        return false;
    };
    let mut parts = rest.split(':');
    let (Some(domain), Some(bus), Some(dev), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let hex = |s: &str, min: usize, max: usize| {
        (min..=max).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
    };
    hex(domain, 4, 8) && hex(bus, 2, 2) && hex(dev, 2, 2) && func.len() == 1 && hex(func, 1, 1)
}

/// Every PCI function under `<root>/sys/bus/pci/devices`, sorted by address.
/// Never fails: a missing bus directory gives an empty scan (with a warning
/// unless the root has no `/sys` at all).
pub fn scan_pci(root: &HostRoot) -> Scan {
    scan_pci_filtered(root, &|_| true)
}

/// Lists the bus directory; `None` (plus a warning when it is odd) when absent.
pub(crate) fn list_bus(root: &HostRoot, bus: &str, warnings: &mut Vec<String>) -> Vec<String> {
    let real = root.resolve(Path::new(bus));
    match std::fs::read_dir(&real) {
        Ok(entries) => {
            let mut names: Vec<String> = entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect();
            names.sort_unstable();
            names
        }
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                warnings.push(format!("{bus}: cannot list: {e}"));
            }
            Vec::new()
        }
    }
}

/// Number of NUMA nodes the machine has (`node*` dirs), 0 when unknown.
pub(crate) fn numa_node_count(root: &HostRoot) -> usize {
    std::fs::read_dir(root.resolve(Path::new(crate::numa::NODE_DIR)))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .and_then(|n| n.strip_prefix("node"))
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .count()
        })
        .unwrap_or(0)
}

/// State shared across the functions of one scan.
struct PciScan<'r> {
    root: &'r HostRoot,
    /// `/sys/bus/pci/devices`, open.
    bus: BorrowedFd<'r>,
    /// Whether `/proc/driver/nvidia/gpus` exists (looked up once).
    nvidia_procfs: Option<bool>,
    resolver: NodeResolver<'r>,
    multi_numa: bool,
    /// PF address → (VF address → N of `virtfnN`).
    vf_indexes: HashMap<String, HashMap<String, u32>>,
    warnings: Vec<String>,
}

/// One function's directory, open and listed once.
struct FnDir {
    /// Host path of the function's directory under `/sys/devices`.
    host: PathBuf,
    /// Entry names in it, sorted.
    names: Vec<String>,
    /// The open directory, for reads relative to it.
    fd: OwnedFd,
}

impl FnDir {
    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
    fn has(&self, name: &str) -> bool {
        self.names
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    }
    fn path(&self, name: &str) -> PathBuf {
        self.host.join(name)
    }
}

/// Bus lists at least this long are scanned on several threads.
const PARALLEL_MIN: usize = 128;

/// Threads for a long bus list: the CPUs this process may use, at most 4.
fn scan_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
    })
}

/// The selector callback of a scan; shared by the scanning threads.
pub(crate) type PciKeep<'a> = &'a (dyn Fn(&mut dyn PciFacts) -> bool + Sync);

/// Scans the PCI functions, keeping those `keep` accepts. A long bus list
/// is split into contiguous parts scanned on a few threads (sysfs reads
/// are syscall-bound); results and warnings keep the bus order.
pub(crate) fn scan_pci_filtered(root: &HostRoot, keep: PciKeep<'_>) -> Scan {
    let mut warnings = Vec::new();
    let names = list_bus(root, PCI_DEVICES, &mut warnings);
    if names.is_empty() {
        return Scan {
            candidates: Vec::new(),
            warnings,
        };
    }
    let bus = match open_dir(&root.resolve(Path::new(PCI_DEVICES))) {
        Ok(fd) => fd,
        Err(e) => {
            warnings.push(format!("{PCI_DEVICES}: cannot open: {e}"));
            return Scan {
                candidates: Vec::new(),
                warnings,
            };
        }
    };
    let multi_numa = numa_node_count(root) > 1;
    let threads = if names.len() >= PARALLEL_MIN {
        scan_threads()
    } else {
        1
    };
    let part_len = names.len().div_ceil(threads);
    let scan_part = |part: &[String]| {
        let mut scan = PciScan {
            root,
            bus: bus.as_fd(),
            resolver: NodeResolver::new(root),
            multi_numa,
            vf_indexes: HashMap::new(),
            nvidia_procfs: None,
            warnings: Vec::new(),
        };
        let candidates: Vec<Candidate> = part
            .iter()
            .filter_map(|name| scan.function(name, keep))
            .collect();
        (candidates, scan.warnings)
    };
    let mut parts = names.chunks(part_len);
    let first = parts.next().unwrap_or_default();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .map(|part| scope.spawn(move || scan_part(part)))
            .collect();
        let mut results = vec![scan_part(first)];
        for handle in handles {
            results.push(
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            );
        }
        results
    });
    let mut candidates = Vec::new();
    for (part_candidates, part_warnings) in results {
        candidates.extend(part_candidates);
        warnings.extend(part_warnings);
    }
    Scan {
        candidates,
        warnings,
    }
}

impl PciScan<'_> {
    fn warn(&mut self, path: &Path, what: impl std::fmt::Display) {
        self.warnings.push(format!("{}: {what}", path.display()));
    }

    /// Host path of the directory an entry of the bus list points to (not
    /// checked to exist).
    fn entry_dir(&mut self, name: &str) -> Option<PathBuf> {
        let link = Path::new(PCI_DEVICES).join(name);
        match read_link_at(self.bus, name) {
            Ok(target) => Some(link_target_host(&link, &target)),
            // Not a symlink (a flattened tree): the entry is the directory.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Some(link),
            Err(e) => {
                self.warn(&link, format_args!("unreadable ({e}); function skipped"));
                None
            }
        }
    }

    /// Lists a function's open directory.
    fn list_function(&mut self, fd: OwnedFd, host: PathBuf) -> Option<FnDir> {
        match names_of(&fd) {
            Ok(names) => Some(FnDir { host, names, fd }),
            Err(e) => {
                self.warn(&host, format_args!("cannot list ({e}); function skipped"));
                None
            }
        }
    }

    /// A hex attribute read without a listing; `required` makes its absence
    /// a warning too.
    fn hex_file(
        &mut self,
        fd: BorrowedFd<'_>,
        dir: &Path,
        name: &str,
        required: bool,
    ) -> Option<u32> {
        let path = dir.join(name);
        let text = match read_trimmed_at(fd, name) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if required {
                    self.warn(&path, "missing");
                }
                return None;
            }
            Err(e) => {
                self.warn(&path, format_args!("unreadable: {e}"));
                return None;
            }
        };
        let value = parse_hex(&text);
        if value.is_none() {
            self.warn(&path, format_args!("not a hex number: {text:?}"));
        }
        value
    }

    /// Name of the driver the `driver` link names, when it is bound (a
    /// dangling link is a warning).
    fn driver_name(&mut self, fd: BorrowedFd<'_>, dir: &Path) -> Option<String> {
        let link = dir.join("driver");
        let (target, relative) = match read_link_at(fd, "driver") {
            Ok(t) => (link_target_host(&link, &t), t.is_relative()),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::InvalidInput
                ) =>
            {
                return None;
            }
            Err(e) => {
                self.warn(&link, format_args!("not a readable link: {e}"));
                return None;
            }
        };
        let exists = if relative {
            exists_at(fd, "driver")
        } else {
            std::fs::symlink_metadata(self.root.resolve(&target)).is_ok()
        };
        if !exists {
            self.warn(&link, format_args!("dangling link to {}", target.display()));
            return None;
        }
        target.file_name()?.to_str().map(str::to_string)
    }

    /// Reads a text attribute that the listing says exists; a read error is a
    /// warning. `None` when absent or unreadable.
    fn text(&mut self, dir: &FnDir, name: &str) -> Option<String> {
        if !dir.has(name) {
            return None;
        }
        match read_trimmed_at(dir.fd(), name) {
            Ok(v) => Some(v),
            Err(e) => {
                self.warn(&dir.path(name), format_args!("unreadable: {e}"));
                None
            }
        }
    }

    /// A decimal attribute.
    fn number<T: std::str::FromStr>(&mut self, dir: &FnDir, name: &str) -> Option<T> {
        let text = self.text(dir, name)?;
        let value = text.parse().ok();
        if value.is_none() {
            self.warn(&dir.path(name), format_args!("not a number: {text:?}"));
        }
        value
    }

    /// Host path a link in the function's directory points to, when the link
    /// exists and its target too (a dangling link is a warning).
    fn link(&mut self, dir: &FnDir, name: &str) -> Option<PathBuf> {
        if !dir.has(name) {
            return None;
        }
        let link = dir.path(name);
        let (target, relative) = match read_link_at(dir.fd(), name) {
            Ok(t) => (link_target_host(&link, &t), t.is_relative()),
            Err(e) => {
                self.warn(&link, format_args!("not a readable link: {e}"));
                return None;
            }
        };
        let exists = if relative {
            exists_at(dir.fd(), name)
        } else {
            std::fs::symlink_metadata(self.root.resolve(&target)).is_ok()
        };
        if !exists {
            self.warn(&link, format_args!("dangling link to {}", target.display()));
            return None;
        }
        Some(target)
    }
}

#[cfg(test)]
#[path = "pci_tests.rs"]
mod tests;
