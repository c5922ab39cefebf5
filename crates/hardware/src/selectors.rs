//! Built-in selectors, as written in a resource's TOML config, and
//! [`discover`], which applies them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::candidate::{Candidate, CandidateKind, Scan};
use crate::error::HardwareError;
use crate::listing::ListingCache;
use crate::nodes::{NodeResolver, ResolvedNode, glob_resolved, has_glob_meta};
use crate::pci::{PciFacts, scan_pci_filtered};
use crate::root::HostRoot;
use crate::sysfs::parse_hex;
use crate::usb::{UsbIdentity, scan_usb_filtered};

/// Device nodes by host path or glob, one candidate per node.
///
/// ```toml
/// nodes = { path = "/dev/dri/renderD*" }
/// nodes = { path = "/dev/fuse", optional = true }
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct NodeSelector {
    /// Absolute host path, or a glob (`*`, `?`, `[…]`) of host paths.
    pub path: String,
    /// A literal path that does not exist is an error unless `optional`;
    /// a glob matching nothing is never an error (a warning unless `optional`).
    #[serde(default)]
    pub optional: bool,
}

/// PCI functions by ID, class, driver or address; every field given must
/// match (an empty selector matches every function).
///
/// Hex values are accepted with or without `0x`, in any case. `class` is 2,
/// 4 or 6 hex digits: `0x03` (base class), `0x0302` (base class and
/// subclass), `0x030200` (with programming interface). `address` is a glob
/// over `0000:3b:00.0`; a pattern with no domain (one `:` at most, `3b:*.0`)
/// is matched against the address without its domain.
///
/// ```toml
/// pci = { vendor = "10de", class = "0x0302" }
/// pci = { driver = "vfio-pci", address = "0000:3b:*" }
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PciSelector {
    /// Vendor ID (`vendor`).
    #[serde(default)]
    pub vendor: Option<String>,
    /// Device ID (`device`).
    #[serde(default)]
    pub device: Option<String>,
    /// Class code or a prefix of it (`class`).
    #[serde(default)]
    pub class: Option<String>,
    /// Bound driver name, exact (`driver` link).
    #[serde(default)]
    pub driver: Option<String>,
    /// PCI address glob.
    #[serde(default)]
    pub address: Option<String>,
    /// Subsystem vendor ID (`subsystem_vendor`).
    #[serde(default)]
    pub subsystem_vendor: Option<String>,
    /// Subsystem device ID (`subsystem_device`).
    #[serde(default)]
    pub subsystem_device: Option<String>,
}

/// USB devices by ID and serial; every field given must match.
///
/// ```toml
/// usb = { vendor = "0403", product = "6001", serial = "A50285BI" }
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct UsbSelector {
    /// Vendor ID (`idVendor`), hex.
    #[serde(default)]
    pub vendor: Option<String>,
    /// Product ID (`idProduct`), hex.
    #[serde(default)]
    pub product: Option<String>,
    /// Serial number, exact.
    #[serde(default)]
    pub serial: Option<String>,
}

/// One built-in selector. In TOML it is a table with exactly one of the keys
/// `nodes`, `pci`, `usb`.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Selector {
    /// Device nodes by path/glob.
    Nodes(NodeSelector),
    /// PCI functions.
    Pci(PciSelector),
    /// USB devices.
    Usb(UsbSelector),
}

impl Selector {
    /// Checks the selector's values without touching the hardware.
    ///
    /// # Errors
    /// [`HardwareError::BadSelector`] or [`HardwareError::BadPattern`] naming
    /// the field and value.
    pub fn validate(&self) -> Result<(), HardwareError> {
        match self {
            Selector::Nodes(n) => crate::nodes::check_pattern(&n.path),
            Selector::Pci(p) => CompiledPci::new(p).map(drop),
            Selector::Usb(u) => CompiledUsb::new(u).map(drop),
        }
    }
}

fn bad(selector: &'static str, field: &'static str, value: &str, reason: &str) -> HardwareError {
    HardwareError::BadSelector {
        selector,
        field,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// A 16-bit hex ID field.
fn id16(
    selector: &'static str,
    field: &'static str,
    value: Option<&String>,
) -> Result<Option<u32>, HardwareError> {
    let Some(v) = value else { return Ok(None) };
    match parse_hex(v) {
        Some(n) if n <= 0xffff => Ok(Some(n)),
        _ => Err(bad(
            selector,
            field,
            v,
            "expected a 16-bit hex ID such as 0x10de",
        )),
    }
}

/// A PCI selector with its values parsed.
#[derive(Debug)]
pub(crate) struct CompiledPci {
    vendor: Option<u32>,
    device: Option<u32>,
    subsystem_vendor: Option<u32>,
    subsystem_device: Option<u32>,
    /// (value, right shift applied to the 24-bit class before comparing).
    class: Option<(u32, u32)>,
    driver: Option<String>,
    address: Option<(glob::Pattern, bool)>,
}

impl CompiledPci {
    pub(crate) fn new(s: &PciSelector) -> Result<Self, HardwareError> {
        let class = match &s.class {
            None => None,
            Some(v) => {
                let digits = v.trim();
                let digits = digits
                    .strip_prefix("0x")
                    .or_else(|| digits.strip_prefix("0X"))
                    .unwrap_or(digits);
                if !matches!(digits.len(), 2 | 4 | 6) {
                    return Err(bad(
                        "pci",
                        "class",
                        v,
                        "expected 2, 4 or 6 hex digits (0x03, 0x0302, 0x030200)",
                    ));
                }
                let n =
                    parse_hex(digits).ok_or_else(|| bad("pci", "class", v, "not a hex number"))?;
                Some((n, (6 - digits.len() as u32) * 4))
            }
        };
        let address = match &s.address {
            None => None,
            Some(a) => {
                let pattern = glob::Pattern::new(a.trim())
                    .map_err(|e| bad("pci", "address", a, &e.to_string()))?;
                Some((pattern, a.matches(':').count() < 2))
            }
        };
        if let Some(d) = &s.driver
            && (d.is_empty() || d.contains('/'))
        {
            return Err(bad("pci", "driver", d, "expected a driver name"));
        }
        Ok(Self {
            vendor: id16("pci", "vendor", s.vendor.as_ref())?,
            device: id16("pci", "device", s.device.as_ref())?,
            subsystem_vendor: id16("pci", "subsystem-vendor", s.subsystem_vendor.as_ref())?,
            subsystem_device: id16("pci", "subsystem-device", s.subsystem_device.as_ref())?,
            class,
            driver: s.driver.clone(),
            address,
        })
    }

    /// True when every field given matches; the cheap facts are asked first
    /// so a mismatch reads as little as possible.
    pub(crate) fn matches(&self, f: &mut dyn PciFacts) -> bool {
        let options = glob::MatchOptions {
            case_sensitive: false,
            require_literal_separator: false,
            require_literal_leading_dot: false,
        };
        if self.vendor.is_some_and(|v| v != f.vendor()) {
            return false;
        }
        if let Some((pattern, short)) = &self.address {
            let address = f.address();
            let hit = pattern.matches_with(address, options)
                || (*short
                    && address
                        .split_once(':')
                        .is_some_and(|(_, rest)| pattern.matches_with(rest, options)));
            if !hit {
                return false;
            }
        }
        if self.device.is_some() && self.device != f.device() {
            return false;
        }
        if let Some((want, shift)) = self.class
            && f.class().is_none_or(|c| c >> shift != want)
        {
            return false;
        }
        if self.subsystem_vendor.is_some() && self.subsystem_vendor != f.subsystem_vendor() {
            return false;
        }
        if self.subsystem_device.is_some() && self.subsystem_device != f.subsystem_device() {
            return false;
        }
        if let Some(want) = &self.driver
            && f.driver() != Some(want.as_str())
        {
            return false;
        }
        true
    }
}

/// A USB selector with its values parsed.
#[derive(Debug)]
pub(crate) struct CompiledUsb {
    vendor: Option<u32>,
    product: Option<u32>,
    serial: Option<String>,
}

impl CompiledUsb {
    pub(crate) fn new(s: &UsbSelector) -> Result<Self, HardwareError> {
        Ok(Self {
            vendor: id16("usb", "vendor", s.vendor.as_ref())?,
            product: id16("usb", "product", s.product.as_ref())?,
            serial: s.serial.clone(),
        })
    }

    pub(crate) fn matches(&self, id: &UsbIdentity<'_>) -> bool {
        self.vendor.is_none_or(|v| v == id.vendor)
            && self.product.is_none_or(|p| Some(p) == id.product)
            && self.serial.as_deref().is_none_or(|s| Some(s) == id.serial)
    }
}

/// Candidate id of a device node path: without `/dev/`, `/` → `-`.
pub fn node_id(path: &Path) -> String {
    let s = path.to_string_lossy();
    let rest = s
        .strip_prefix("/dev/")
        .or_else(|| s.strip_prefix('/'))
        .unwrap_or(&s);
    if rest.contains('/') {
        rest.replace('/', "-")
    } else {
        rest.to_string()
    }
}

/// The candidate for one resolved node.
fn node_candidate(root: &HostRoot, resolver: &NodeResolver<'_>, r: ResolvedNode) -> Candidate {
    let node = r.node;
    let path = node.path.to_string_lossy();
    let id = node_id(&node.path);
    let mut attrs = BTreeMap::new();
    attrs.insert("node.path".to_string(), path.into_owned());
    if let Some(t) = &r.target {
        attrs.insert("node.target".to_string(), t.to_string_lossy().into_owned());
    }
    let sysfs_dir = r.sysfs_dir.or_else(|| resolver.sysfs_dir(&node));
    let numa_nodes = sysfs_dir
        .as_deref()
        .and_then(|d| crate::sysfs::ancestor_numa(root, d))
        .into_iter()
        .collect();
    Candidate {
        id,
        kind: CandidateKind::Node,
        numa_nodes,
        attributes: attrs.into(),
        nodes: vec![node],
        sysfs_dir,
    }
}

/// USB devices and device nodes for [`discover`].
fn scan_rest(
    root: &HostRoot,
    usb: &[CompiledUsb],
    nodes: &[&NodeSelector],
    listings: Option<&ListingCache>,
) -> Result<Scan, HardwareError> {
    let mut out = Scan::default();
    if !usb.is_empty() {
        out = scan_usb_filtered(root, &|id| usb.iter().any(|s| s.matches(id)));
    }
    let mut resolver = NodeResolver::with_listings(root, listings);
    for sel in nodes {
        let (resolved, issues) = glob_resolved(&mut resolver, &sel.path)?;
        for (path, e) in issues {
            out.warnings.push(format!("{}: {e}", path.display()));
        }
        if resolved.is_empty() && !sel.optional {
            if !has_glob_meta(&sel.path) {
                return Err(HardwareError::NodeMissing {
                    path: PathBuf::from(&sel.path),
                });
            }
            out.warnings
                .push(format!("{}: matched no device node", sel.path));
        }
        out.candidates.extend(
            resolved
                .into_iter()
                .map(|r| node_candidate(root, &resolver, r)),
        );
    }
    Ok(out)
}

/// Applies `selectors` to the hardware under `root`: the union of what each
/// selects, unique by id (first wins), sorted by id. Only the buses some
/// selector names are scanned; their warnings are returned with the result.
///
/// Blocking (call it from `spawn_blocking` in async code): it reads the
/// filesystem, and scans PCI on short-lived scoped threads alongside the
/// node globs when there is enough to do.
///
/// # Errors
/// An invalid selector ([`HardwareError::BadSelector`],
/// [`HardwareError::BadPattern`]), or a literal node path that does not exist
/// and is not `optional` ([`HardwareError::NodeMissing`]).
pub fn discover(root: &HostRoot, selectors: &[Selector]) -> Result<Scan, HardwareError> {
    discover_through(root, selectors, None)
}

/// As [`discover`], reading the directories the node globs list through
/// `listings` (a [`ChangeWatcher`](crate::ChangeWatcher)'s): a directory
/// under its watch is read again only after a change under it, or once
/// its kept listing is [`LISTING_MAX_AGE`](crate::LISTING_MAX_AGE) old.
/// The same result as [`discover`] but for the moment between a change and
/// its event, which wakes the watcher's receivers for the next scan.
///
/// # Errors
/// As [`discover`].
pub fn discover_cached(
    root: &HostRoot,
    selectors: &[Selector],
    listings: &ListingCache,
) -> Result<Scan, HardwareError> {
    discover_through(root, selectors, Some(listings))
}

fn discover_through(
    root: &HostRoot,
    selectors: &[Selector],
    listings: Option<&ListingCache>,
) -> Result<Scan, HardwareError> {
    let mut pci = Vec::new();
    let mut usb = Vec::new();
    let mut nodes = Vec::new();
    for s in selectors {
        match s {
            Selector::Pci(p) => pci.push(CompiledPci::new(p)?),
            Selector::Usb(u) => usb.push(CompiledUsb::new(u)?),
            Selector::Nodes(n) => {
                crate::nodes::check_pattern(&n.path)?;
                nodes.push(n);
            }
        }
    }

    // The PCI scan (syscall-bound) runs on a second thread while the other
    // buses and the node globs are read here, when there is both to do.
    let pci_scan = || scan_pci_filtered(root, &|facts| pci.iter().any(|s| s.matches(facts)));
    let (pci_result, rest) = std::thread::scope(|scope| {
        let parallel = !pci.is_empty() && (!usb.is_empty() || !nodes.is_empty());
        let handle = parallel.then(|| scope.spawn(pci_scan));
        let rest = scan_rest(root, &usb, &nodes, listings);
        let pci_result = match handle {
            Some(h) => h
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
            None if !pci.is_empty() => pci_scan(),
            None => Scan::default(),
        };
        (pci_result, rest)
    });
    let rest = rest?;
    let mut found = pci_result.candidates;
    let mut warnings = pci_result.warnings;
    found.extend(rest.candidates);
    warnings.extend(rest.warnings);
    // Stable: of equal ids, the first selector's candidate stays.
    found.sort_by(|a, b| a.id.cmp(&b.id));
    found.dedup_by(|later, first| later.id == first.id);
    Ok(Scan {
        candidates: found,
        warnings,
    })
}

#[cfg(test)]
#[path = "selectors_tests.rs"]
mod tests;
