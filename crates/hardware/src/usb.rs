//! USB devices from `/sys/bus/usb/devices`.
//!
//! Entries whose name holds a `:` are interfaces (`1-1:1.0`, and the root
//! hubs' `1-0:1.0`) and are skipped; devices (`1-1.2`) and root hubs (`usb1`)
//! are reported, each with the node `/dev/bus/usb/BBB/DDD` built from
//! `busnum`/`devnum` when it exists under the root (numbers from the device's
//! `dev` file). A dangling link or a missing/non-hex `idVendor` skips the
//! device with a warning; other unparsable values leave the fact out, with a
//! warning.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use crate::candidate::{Candidate, CandidateKind, DeviceNode, Scan};
use crate::nodes::{NodeResolver, parse_devnum};
use crate::pci::list_bus;
use crate::root::{HostRoot, link_target_host};
use crate::sysfs::{parse_hex, read_trimmed};

/// Host path of the USB device list.
pub const USB_DEVICES: &str = "/sys/bus/usb/devices";

/// The identifying facts of a USB device, for selectors.
#[derive(Clone, Debug)]
pub(crate) struct UsbIdentity<'a> {
    pub vendor: u32,
    pub product: Option<u32>,
    pub serial: Option<&'a str>,
}

/// Every USB device (not interface) under `<root>/sys/bus/usb/devices`,
/// sorted by port path. Never fails.
pub fn scan_usb(root: &HostRoot) -> Scan {
    scan_usb_filtered(root, &|_| true)
}

pub(crate) fn scan_usb_filtered(root: &HostRoot, keep: &dyn Fn(&UsbIdentity<'_>) -> bool) -> Scan {
    let mut warnings = Vec::new();
    let names = list_bus(root, USB_DEVICES, &mut warnings);
    let mut resolver = NodeResolver::new(root);
    let mut candidates = Vec::new();
    for name in names.iter().filter(|n| !n.contains(':')) {
        if let Some(c) = usb_device(root, &mut resolver, name, keep, &mut warnings) {
            candidates.push(c);
        }
    }
    Scan {
        candidates,
        warnings,
    }
}

fn usb_device(
    root: &HostRoot,
    resolver: &mut NodeResolver<'_>,
    name: &str,
    keep: &dyn Fn(&UsbIdentity<'_>) -> bool,
    warnings: &mut Vec<String>,
) -> Option<Candidate> {
    let dir = device_dir(root, name, warnings)?;
    let files = UsbFiles::read(root, &dir, warnings);
    let vendor = parse_vendor(&dir, files.vendor.as_deref(), warnings)?;
    let product = parse_product(&dir, files.product.as_deref(), warnings);
    let identity = UsbIdentity {
        vendor,
        product,
        serial: files.serial.as_deref(),
    };
    if !keep(&identity) {
        return None;
    }

    let mut attrs = BTreeMap::new();
    attrs.insert("usb.port".into(), name.to_string());
    attrs.insert("usb.vendor".into(), format!("0x{vendor:04x}"));
    if let Some(p) = product {
        attrs.insert("usb.product".into(), format!("0x{p:04x}"));
    }
    let mut put = |key: &str, value: Option<String>| {
        if let Some(v) = value.filter(|v| !v.is_empty()) {
            attrs.insert(key.to_string(), v);
        }
    };
    put("usb.serial", files.serial.clone());
    put("usb.manufacturer", files.manufacturer);
    put("usb.product-name", files.product_name);
    put("usb.speed", files.speed);
    put(
        "usb.device-class",
        files
            .device_class
            .and_then(|c| parse_hex(&c))
            .map(|c| format!("0x{c:02x}")),
    );
    put("usb.path", Some(dir.to_string_lossy().into_owned()));

    let bus = parse_number(&dir, "busnum", files.busnum, warnings);
    let devn = parse_number(&dir, "devnum", files.devnum, warnings);
    if let Some(b) = bus {
        attrs.insert("usb.busnum".into(), b.to_string());
    }
    if let Some(d) = devn {
        attrs.insert("usb.devnum".into(), d.to_string());
    }

    let mut numa_nodes = Vec::new();
    if let Some(n) = crate::sysfs::ancestor_numa(root, &dir) {
        attrs.insert("usb.numa-node".into(), n.to_string());
        numa_nodes.push(n);
    }

    let nodes = match (bus, devn) {
        (Some(b), Some(d)) => bus_node(resolver, b, d, files.dev.as_deref(), warnings),
        _ => Vec::new(),
    };

    Some(Candidate {
        id: name.to_string(),
        kind: CandidateKind::Usb,
        numa_nodes,
        attributes: attrs.into(),
        nodes,
        sysfs_dir: Some(dir),
    })
}

/// The host path of device `name`'s sysfs folder: where its entry under
/// [`USB_DEVICES`] links to. `None`, with a warning, when the link is
/// unreadable or dangling.
fn device_dir(root: &HostRoot, name: &str, warnings: &mut Vec<String>) -> Option<PathBuf> {
    let link = Path::new(USB_DEVICES).join(name);
    let dir = match std::fs::read_link(root.resolve(&link)) {
        Ok(target) => link_target_host(&link, &target),
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => link.clone(),
        Err(e) => {
            warnings.push(format!(
                "{}: unreadable ({e}); device skipped",
                link.display()
            ));
            return None;
        }
    };
    if !root.resolve(&dir).is_dir() {
        warnings.push(format!(
            "{}: dangling link to {}; device skipped",
            link.display(),
            dir.display()
        ));
        return None;
    }
    Some(dir)
}

/// The attribute files of a USB device's sysfs folder, as read (trimmed);
/// `None` for one absent or unreadable.
struct UsbFiles {
    vendor: Option<String>,
    product: Option<String>,
    /// Never empty.
    serial: Option<String>,
    busnum: Option<String>,
    devnum: Option<String>,
    manufacturer: Option<String>,
    product_name: Option<String>,
    speed: Option<String>,
    device_class: Option<String>,
    dev: Option<String>,
}

impl UsbFiles {
    /// Reads every file of `dir`: one absent is `None` silently, one
    /// unreadable `None` with a warning.
    fn read(root: &HostRoot, dir: &Path, warnings: &mut Vec<String>) -> Self {
        let mut read = |file: &str| -> Option<String> {
            let path = dir.join(file);
            match read_trimmed(&root.resolve(&path)) {
                Ok(v) => Some(v),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => {
                    warnings.push(format!("{}: unreadable: {e}", path.display()));
                    None
                }
            }
        };
        Self {
            vendor: read("idVendor"),
            product: read("idProduct"),
            serial: read("serial").filter(|s| !s.is_empty()),
            busnum: read("busnum"),
            devnum: read("devnum"),
            manufacturer: read("manufacturer"),
            product_name: read("product"),
            speed: read("speed"),
            device_class: read("bDeviceClass"),
            dev: read("dev"),
        }
    }
}

/// The vendor ID from `idVendor`'s text; `None`, with a warning saying
/// the device is skipped, when it is missing or not hex.
fn parse_vendor(dir: &Path, text: Option<&str>, warnings: &mut Vec<String>) -> Option<u32> {
    let vendor_path = dir.join("idVendor");
    let Some(vendor_text) = text else {
        warnings.push(format!(
            "{}: missing; device skipped",
            vendor_path.display()
        ));
        return None;
    };
    let Some(vendor) = parse_hex(vendor_text) else {
        warnings.push(format!(
            "{}: not a hex number: {vendor_text:?}; device skipped",
            vendor_path.display()
        ));
        return None;
    };
    Some(vendor)
}

/// The product ID from `idProduct`'s text; `None`, with a warning, when
/// it is missing or not hex.
fn parse_product(dir: &Path, text: Option<&str>, warnings: &mut Vec<String>) -> Option<u32> {
    match text {
        None => {
            warnings.push(format!("{}: missing", dir.join("idProduct").display()));
            None
        }
        Some(t) => {
            let v = parse_hex(t);
            if v.is_none() {
                warnings.push(format!(
                    "{}: not a hex number: {t:?}",
                    dir.join("idProduct").display()
                ));
            }
            v
        }
    }
}

/// The decimal number in `text`, read from `dir`'s `file`; `None` when
/// absent, or, with a warning, not a number.
fn parse_number(
    dir: &Path,
    file: &str,
    text: Option<String>,
    warnings: &mut Vec<String>,
) -> Option<u32> {
    let text = text?;
    let n: Option<u32> = text.parse().ok();
    if n.is_none() {
        warnings.push(format!(
            "{}: not a number: {text:?}",
            dir.join(file).display()
        ));
    }
    n
}

/// The node `/dev/bus/usb/BBB/DDD` of bus `bus`, device `devnum`, when it
/// exists under the root (`dev`: the device's `dev` file, a hint for its
/// numbers); a node unreadable for another reason is left out with a
/// warning.
fn bus_node(
    resolver: &mut NodeResolver<'_>,
    bus: u32,
    devnum: u32,
    dev: Option<&str>,
    warnings: &mut Vec<String>,
) -> Vec<DeviceNode> {
    let mut nodes = Vec::new();
    let path = PathBuf::from(format!("/dev/bus/usb/{bus:03}/{devnum:03}"));
    let hint = dev.and_then(parse_devnum);
    match resolver.resolve(&path, hint) {
        Ok(Some(r)) => nodes.push(r.node),
        Ok(None) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => warnings.push(format!("{}: unreadable node: {e}", path.display())),
    }
    nodes
}
