//! The device nodes a PCI function maps to: class devices under the
//! function (`drm/card*`, `drm/renderD*`, `infiniband_verbs`, `accel`,
//! `vfio-dev`) and, for a function bound to `nvidia`, the node named by the
//! driver's `/proc/driver/nvidia/gpus/<address>/information`.

use std::io;
use std::path::{Path, PathBuf};

use super::{FnDir, PciScan};
use crate::candidate::DeviceNode;
use crate::fsat::{names_of, open_dir_at, read_at};
use crate::nodes::parse_devnum;
use crate::sysfs::{read_string, uevent_value};

/// Child class directories of a PCI function that hold device nodes:
/// (sysfs dir, default `/dev` subdir, name prefixes accepted or empty for all).
pub(super) const NODE_CLASSES: &[(&str, &str, &[&str])] = &[
    ("drm", "dri", &["card", "renderD"]),
    ("infiniband_verbs", "infiniband", &[]),
    ("accel", "accel", &[]),
    ("vfio-dev", "vfio/devices", &[]),
];

impl PciScan<'_> {
    /// Nodes of the class devices in the function's `class_dir` (e.g. `drm`).
    pub(super) fn class_nodes(
        &mut self,
        dir: &FnDir,
        class_dir: &str,
        dev_dir: &str,
        prefixes: &[&str],
        nodes: &mut Vec<DeviceNode>,
    ) {
        let Ok(class_fd) = open_dir_at(dir.fd(), class_dir) else {
            return;
        };
        let Ok(names) = names_of(&class_fd) else {
            return;
        };
        for name in names {
            if !prefixes.is_empty() && !prefixes.iter().any(|p| name.starts_with(p)) {
                continue;
            }
            let uevent = read_at(&class_fd, &format!("{name}/uevent")).unwrap_or_default();
            let from_uevent = || -> Option<(u32, u32)> {
                Some((
                    uevent_value(&uevent, "MAJOR")?.parse().ok()?,
                    uevent_value(&uevent, "MINOR")?.parse().ok()?,
                ))
            };
            let hint = from_uevent().or_else(|| {
                read_at(&class_fd, &format!("{name}/dev"))
                    .ok()
                    .as_deref()
                    .and_then(parse_devnum)
            });
            // Only class devices with numbers are nodes (drm connectors are not).
            if hint.is_none() && uevent_value(&uevent, "DEVNAME").is_none() {
                continue;
            }
            let path = match uevent_value(&uevent, "DEVNAME") {
                Some(devname) => crate::root::normalize_host(&Path::new("/dev").join(devname)),
                None => PathBuf::from(format!("/dev/{dev_dir}/{name}")),
            };
            self.add_node(&path, hint, nodes);
        }
    }

    /// Adds the node at `path` when it exists under the root.
    pub(super) fn add_node(
        &mut self,
        path: &Path,
        hint: Option<(u32, u32)>,
        nodes: &mut Vec<DeviceNode>,
    ) {
        match self.resolver.resolve(path, hint) {
            Ok(Some(r)) => nodes.push(r.node),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => self.warn(path, format_args!("unreadable node: {e}")),
        }
    }

    /// `Device Minor` and `GPU UUID` of an NVIDIA GPU from the driver's
    /// procfs; none without a minor.
    pub(super) fn nvidia_info(&mut self, address: &str) -> Option<(u32, Option<String>)> {
        let root = self.root;
        let procfs = *self
            .nvidia_procfs
            .get_or_insert_with(|| root.resolve(Path::new("/proc/driver/nvidia/gpus")).is_dir());
        if !procfs {
            return None;
        }
        let path = PathBuf::from(format!("/proc/driver/nvidia/gpus/{address}/information"));
        let text = read_string(&self.root.resolve(&path)).ok()?;
        let line = text.lines().find_map(|l| l.strip_prefix("Device Minor:"))?;
        let minor = line.trim().parse().ok();
        if minor.is_none() {
            self.warn(&path, format_args!("bad Device Minor: {:?}", line.trim()));
        }
        Some((minor?, nvidia_uuid(&text)))
    }
}

/// The `GPU UUID` line of an NVIDIA `information` file (`GPU-<hex groups>`),
/// when it is there and well formed.
fn nvidia_uuid(information: &str) -> Option<String> {
    let value = information
        .lines()
        .find_map(|l| l.strip_prefix("GPU UUID:"))?
        .trim();
    let ok = value.starts_with("GPU-")
        && value.len() <= 64
        && value[4..]
            .chars()
            .all(|c| c.is_ascii_hexdigit() || c == '-');
    ok.then(|| value.to_string())
}

#[cfg(test)]
#[path = "nodes_tests.rs"]
mod tests;
