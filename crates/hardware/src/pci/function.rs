//! One PCI function read into a candidate: its folder opened beneath the
//! root, the facts a selector keeps it by, its attributes (identity,
//! NUMA, IOMMU group, SR-IOV, link) and device nodes.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::facts::{LazyFacts, PciFacts};
use super::nodes::NODE_CLASSES;
use super::{FnDir, PCI_DEVICES, PciKeep, PciScan, is_pci_address};
use crate::DeviceNode;
use crate::candidate::{Candidate, CandidateKind};
use crate::fsat::{names_at, open_dir, read_trimmed_at};
use crate::sysfs::parse_hex;

impl PciScan<'_> {
    pub(super) fn function(&mut self, name: &str, keep: PciKeep<'_>) -> Option<Candidate> {
        if !is_pci_address(name) {
            self.warn(
                &Path::new(PCI_DEVICES).join(name),
                "not a PCI address; skipped",
            );
            return None;
        }
        let (host, fd, vendor) = self.open_function(name)?;
        let mut facts = LazyFacts {
            scan: self,
            fd: fd.as_fd(),
            host: &host,
            address: name,
            vendor,
            device: None,
            class: None,
            subsystem_vendor: None,
            subsystem_device: None,
            driver: None,
        };
        if !keep(&mut facts) {
            return None;
        }
        let device = facts.device();
        let class = facts.class();
        let subsystem_vendor = facts.subsystem_vendor();
        let subsystem_device = facts.subsystem_device();
        let driver = facts.driver().map(str::to_string);
        let dir = self.list_function(fd, host)?;

        let mut attrs = BTreeMap::new();
        attrs.insert("pci.address".into(), name.to_string());
        attrs.insert("pci.vendor".into(), format!("0x{vendor:04x}"));
        if let Some(v) = device {
            attrs.insert("pci.device".into(), format!("0x{v:04x}"));
        }
        if let Some(v) = class {
            attrs.insert("pci.class".into(), format!("0x{v:06x}"));
        }
        if let Some(v) = subsystem_vendor {
            attrs.insert("pci.subsystem-vendor".into(), format!("0x{v:04x}"));
        }
        if let Some(v) = subsystem_device {
            attrs.insert("pci.subsystem-device".into(), format!("0x{v:04x}"));
        }
        if let Some(d) = &driver {
            attrs.insert("pci.driver".into(), d.clone());
        }
        attrs.insert("pci.path".into(), dir.host.to_string_lossy().into_owned());

        let mut numa_nodes = Vec::new();
        if let Some(n) = self.number::<i64>(&dir, "numa_node") {
            if n >= 0 {
                numa_nodes.push(n);
                attrs.insert("pci.numa-node".into(), n.to_string());
            } else if self.multi_numa {
                self.warn(
                    &dir.path("numa_node"),
                    format_args!("is {n} on a machine with several NUMA nodes; locality unknown"),
                );
            }
        }

        let group = self
            .link(&dir, "iommu_group")
            .and_then(|t| t.file_name().and_then(|n| n.to_str()).map(str::to_string));
        if let Some(g) = &group {
            attrs.insert("pci.iommu-group".into(), g.clone());
        }

        self.sriov_and_link_attributes(&dir, name, &mut attrs);

        let nodes =
            self.function_nodes(&dir, name, driver.as_deref(), group.as_deref(), &mut attrs);

        Some(Candidate {
            id: name.to_string(),
            kind: CandidateKind::Pci,
            numa_nodes,
            attributes: attrs.into(),
            nodes,
            sysfs_dir: Some(dir.host),
        })
    }

    /// Opens function `name`'s sysfs folder (by its lexically resolved
    /// host path, so an absolute link target stays beneath the root) and
    /// reads its vendor; a function that cannot be is skipped with a
    /// warning.
    fn open_function(&mut self, name: &str) -> Option<(PathBuf, OwnedFd, u32)> {
        let host = self.entry_dir(name)?;
        let fd = match open_dir(&self.root.resolve(&host)) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.warn(
                    &Path::new(PCI_DEVICES).join(name),
                    format_args!("dangling link to {}; function skipped", host.display()),
                );
                return None;
            }
            Err(e) => {
                self.warn(&host, format_args!("cannot open ({e}); function skipped"));
                return None;
            }
        };
        let vendor_path = host.join("vendor");
        let text = match read_trimmed_at(&fd, "vendor") {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.warn(&vendor_path, "missing; function skipped");
                return None;
            }
            Err(e) => {
                self.warn(
                    &vendor_path,
                    format_args!("unreadable ({e}); function skipped"),
                );
                return None;
            }
        };
        let Some(vendor) = parse_hex(&text) else {
            self.warn(
                &vendor_path,
                format_args!("not a hex number: {text:?}; function skipped"),
            );
            return None;
        };
        Some((host, fd, vendor))
    }

    /// The SR-IOV facts (physical function and VF index, or the virtual
    /// functions), the link's speed and width, local CPUs and network
    /// interfaces of function `name`, into `attrs`.
    fn sriov_and_link_attributes(
        &mut self,
        dir: &FnDir,
        name: &str,
        attrs: &mut BTreeMap<String, String>,
    ) {
        if let Some(pf_dir) = self.link(dir, "physfn")
            && let Some(pf) = pf_dir.file_name().and_then(|n| n.to_str())
        {
            let pf = pf.to_string();
            if let Some(index) = self.vf_index(&pf, &pf_dir, name) {
                attrs.insert("pci.vf-index".into(), index.to_string());
            }
            attrs.insert("pci.physfn".into(), pf);
        }
        let vfs = self.virtfns(dir);
        if !vfs.is_empty() {
            let list: Vec<&str> = vfs.iter().map(|(_, a)| a.as_str()).collect();
            attrs.insert("pci.virtfns".into(), list.join(","));
            self.vf_indexes.insert(
                name.to_string(),
                vfs.into_iter().map(|(i, a)| (a, i)).collect(),
            );
        }

        for (file, key) in [
            ("sriov_totalvfs", "pci.sriov-totalvfs"),
            ("sriov_numvfs", "pci.sriov-numvfs"),
        ] {
            if let Some(n) = self.number::<u32>(dir, file) {
                attrs.insert(key.into(), n.to_string());
            }
        }
        for (file, key) in [
            ("current_link_speed", "pci.link-speed"),
            ("current_link_width", "pci.link-width"),
            ("max_link_speed", "pci.max-link-speed"),
            ("max_link_width", "pci.max-link-width"),
            ("local_cpulist", "pci.local-cpus"),
        ] {
            if let Some(v) = self.text(dir, file)
                && !v.is_empty()
            {
                attrs.insert(key.into(), v);
            }
        }
        if dir.has("net") {
            let net = names_at(dir.fd(), "net");
            if !net.is_empty() {
                attrs.insert("pci.net".into(), net.join(","));
            }
        }
    }

    /// The device nodes of function `name`: those of its classes under
    /// /dev, its IOMMU group's VFIO node when bound to `vfio-pci`, and the
    /// NVIDIA GPU node (its minor and UUID into `attrs`); sorted, once each.
    fn function_nodes(
        &mut self,
        dir: &FnDir,
        name: &str,
        driver: Option<&str>,
        group: Option<&str>,
        attrs: &mut BTreeMap<String, String>,
    ) -> Vec<DeviceNode> {
        let mut nodes = Vec::new();
        for &(class_dir, dev_dir, prefixes) in NODE_CLASSES {
            if dir.has(class_dir) {
                self.class_nodes(dir, class_dir, dev_dir, prefixes, &mut nodes);
            }
        }
        if let (Some("vfio-pci"), Some(g)) = (driver, group) {
            self.add_node(&PathBuf::from(format!("/dev/vfio/{g}")), None, &mut nodes);
        }
        if driver == Some("nvidia")
            && let Some((minor, uuid)) = self.nvidia_info(name)
        {
            attrs.insert("nvidia.minor".into(), minor.to_string());
            if let Some(uuid) = uuid {
                attrs.insert("nvidia.uuid".into(), uuid);
            }
            self.add_node(
                &PathBuf::from(format!("/dev/nvidia{minor}")),
                None,
                &mut nodes,
            );
        }
        nodes.sort_by(|a, b| a.path.cmp(&b.path));
        nodes.dedup_by(|a, b| a.path == b.path);
        nodes
    }
}
