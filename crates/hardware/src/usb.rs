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

use crate::candidate::{Candidate, CandidateKind, Scan};
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
    // Reads an optional attribute: absent → None silently, unreadable → warning.
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
    let vendor_text = read("idVendor");
    let product_text = read("idProduct");
    let serial = read("serial").filter(|s| !s.is_empty());
    let busnum = read("busnum");
    let devnum = read("devnum");
    let manufacturer = read("manufacturer");
    let product_name = read("product");
    let speed = read("speed");
    let device_class = read("bDeviceClass");
    let dev = read("dev");

    let vendor_path = dir.join("idVendor");
    let Some(vendor_text) = vendor_text else {
        warnings.push(format!(
            "{}: missing; device skipped",
            vendor_path.display()
        ));
        return None;
    };
    let Some(vendor) = parse_hex(&vendor_text) else {
        warnings.push(format!(
            "{}: not a hex number: {vendor_text:?}; device skipped",
            vendor_path.display()
        ));
        return None;
    };
    let product = match &product_text {
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
    };
    let identity = UsbIdentity {
        vendor,
        product,
        serial: serial.as_deref(),
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
    put("usb.serial", serial.clone());
    put("usb.manufacturer", manufacturer);
    put("usb.product-name", product_name);
    put("usb.speed", speed);
    put(
        "usb.device-class",
        device_class
            .and_then(|c| parse_hex(&c))
            .map(|c| format!("0x{c:02x}")),
    );
    put("usb.path", Some(dir.to_string_lossy().into_owned()));

    let number = |file: &str, text: Option<String>, warnings: &mut Vec<String>| {
        let text = text?;
        let n: Option<u32> = text.parse().ok();
        if n.is_none() {
            warnings.push(format!(
                "{}: not a number: {text:?}",
                dir.join(file).display()
            ));
        }
        n
    };
    let bus = number("busnum", busnum, warnings);
    let devn = number("devnum", devnum, warnings);
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

    let mut nodes = Vec::new();
    if let (Some(b), Some(d)) = (bus, devn) {
        let path = PathBuf::from(format!("/dev/bus/usb/{b:03}/{d:03}"));
        let hint = dev.as_deref().and_then(parse_devnum);
        match resolver.resolve(&path, hint) {
            Ok(Some(r)) => nodes.push(r.node),
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => warnings.push(format!("{}: unreadable node: {e}", path.display())),
        }
    }

    Some(Candidate {
        id: name.to_string(),
        kind: CandidateKind::Usb,
        numa_nodes,
        attributes: attrs.into(),
        nodes,
        sysfs_dir: Some(dir),
    })
}
