//! A resource's device set as the DRA devices its ResourceSlices carry.
//!
//! Every advertised device ID (replica IDs included) becomes one
//! [`DraDevice`] named by `wdp_k8s_naming::device_name` (a DNS
//! label, reversible with `naming::device_id`). Its attributes:
//!
//! - each of the device's string attributes, the key made a DRA
//!   identifier by [`attribute_id`] (characters outside `[A-Za-z0-9_]`
//!   become `_`, lower-case, a leading digit gets a `_` in front, at most
//!   [`MAX_ATTRIBUTE_ID`] characters) and qualified with the driver's
//!   domain (`<driver>/<id>`); the value typed by [`attribute_value`]
//!   (`true`/`false` → bool, a decimal `i64` → int, a semantic version →
//!   version, anything else a string of at most [`MAX_ATTRIBUTE_VALUE`]
//!   characters; longer values are dropped and reported, except a
//!   `pci.path` whose root complex is published as `pcieRoot`);
//! - the Kubernetes standard attributes of `standard_attributes` (NUMA
//!   node, PCIe root, PCI bus ID) the device's NUMA nodes and PCI facts
//!   give.
//!
//! At most [`MAX_ATTRIBUTES`] attributes fit a device (the API server's
//! limit); the standard ones come first, then the device's attributes in
//! their order, the rest reported as dropped. When two keys map to the same
//! identifier the first wins and the second is reported.
//!
//! Health becomes a taint: an unhealthy device carries key
//! `<driver>/unhealthy` ([`unhealthy_taint_key`]), the reason made a label
//! value by [`taint_value`] as its value, effect `NoSchedule`; a healthy
//! device carries none, so recovery removes the taint. A `device-taints`
//! guest's taints come first (an unqualified key gets `<driver>/`; through
//! `device-taints-v2`, WIT 0.1.3, the effect may be `None`); the health
//! taint follows unless the guest gave its key itself. How many a device
//! may carry and whether `None` is known depend on the API server: the
//! publishing loop fits them first ([`crate::taint_fit`]).
//!
//! A withheld device (`wdp_resource::withholding`: while the resource
//! moves over from the device-plugin API, one a running container holds)
//! is left out, and so are its partitions: not tainted, because a
//! scheduler without the `DRADeviceTaints` gate ignores taints, and a
//! device left out cannot be allocated by any scheduler.
//!
//! The `dra-layout` guest's answer (WIT 0.1.2) adds the counter sets of
//! the pool, each device's counter consumption, capacity and whether it
//! may be allocated several times, and partitions: devices of their own,
//! named from their IDs like any device, carrying their parent's
//! attributes, health and taints plus their own attributes, and marked
//! [`DraDevice::partition_of`] their parent's DRA name. A partition's
//! ID (a DNS label: the layout check refuses anything else) is its DRA
//! name as it is; one that equals a device's DRA name is left out.
//!
//! The functions are pure: problems come back as [`DeviceProblem`]s for
//! the caller to log (once per change, not once per publish).

use std::collections::BTreeMap;
use std::fmt;

use wdp_dra_client::{
    AttributeValue, Capacity, CapacityPolicy, CapacityRange, CounterConsumption, CounterSet,
    DeviceTaint, DraDevice, TaintEffect,
};
use wdp_k8s_naming as naming;

use wdp_policy::types as wit;
use wdp_resource::DraExtras;
use wdp_resource::{AdvertisedDevice, DeviceSet};

use crate::standard_attributes::{PCI_PATH_FACT, PCIE_ROOT, standard_attributes};

/// The name part of the health taint key: `<driver>/unhealthy`.
pub const UNHEALTHY_TAINT_NAME: &str = "unhealthy";
/// The longest attribute identifier (the part after `<driver>/`).
pub const MAX_ATTRIBUTE_ID: usize = 32;
/// The longest string or version attribute value.
pub const MAX_ATTRIBUTE_VALUE: usize = 64;
/// The most attributes (and capacities) one device may carry.
pub const MAX_ATTRIBUTES: usize = 32;
/// The longest label value, and so the longest taint value.
pub const MAX_TAINT_VALUE: usize = 63;
/// The taint value of an unhealthy device whose reason is empty or has no
/// usable character.
pub const NO_REASON_TAINT_VALUE: &str = "no-reason-given";

/// Something of a device that could not be published as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceProblem {
    /// The device ID has no DRA device name; the device is left out.
    Unnamed {
        /// The device ID.
        id: String,
        /// Why (from `naming::device_name`).
        reason: String,
    },
    /// An attribute was left out of the device.
    AttributeDropped {
        /// The device ID.
        id: String,
        /// The attribute's key as the guest or hardware named it.
        key: String,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for DeviceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unnamed { id, reason } => {
                write!(f, "device {id:?} is not published: {reason}")
            }
            Self::AttributeDropped { id, key, reason } => {
                write!(
                    f,
                    "attribute {key:?} of device {id:?} is not published: {reason}"
                )
            }
        }
    }
}

/// The DRA devices of a device set, with what could not be published.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DraDeviceList {
    /// One device per advertised ID that has a DRA name, in ID order, then
    /// the partitions in ID order.
    pub devices: Vec<DraDevice>,
    /// The pool's counter sets (from the `dra-layout` guest).
    pub counter_sets: Vec<CounterSet>,
    /// What was left out, and why.
    pub problems: Vec<DeviceProblem>,
}

/// The DRA devices of `set` for `driver` (see the module docs).
pub fn dra_devices(driver: &str, set: &DeviceSet) -> DraDeviceList {
    dra_devices_with(driver, set, set.dra())
}

/// [`dra_devices`] with `extras` in place of the set's own DRA extras
/// (the set's with its taints fitted to the API server, see
/// [`crate::taint_fit`]).
pub fn dra_devices_with(driver: &str, set: &DeviceSet, extras: &DraExtras) -> DraDeviceList {
    let mut list = DraDeviceList {
        counter_sets: extras.counter_sets.iter().map(counter_set).collect(),
        ..DraDeviceList::default()
    };
    let withholding = set.withholding();
    for device in set.devices() {
        if withholding.withholds(&device.device.device_id) {
            continue;
        }
        if let Some(mut dra) = dra_device(driver, device, &mut list.problems) {
            apply_extras(driver, extras, device, &mut dra);
            list.devices.push(dra);
        }
    }
    for partition in extras.partitions.values() {
        if list.devices.iter().any(|d| d.name == partition.id) {
            list.problems.push(DeviceProblem::Unnamed {
                id: partition.id.clone(),
                reason: "a device of the resource is published under that name".to_owned(),
            });
            continue;
        }
        let Some(parent) = set
            .devices()
            .iter()
            .find(|d| d.device.device_id == partition.parent)
        else {
            continue;
        };
        if withholding.withholds(&parent.device.device_id) {
            continue;
        }
        if let Some(dra) = partition_device(driver, extras, parent, partition, &mut list.problems) {
            list.devices.push(dra);
        }
    }
    list
}

/// Adds the layout and guest taints of `device` (an advertised device) to
/// its DRA device.
fn apply_extras(driver: &str, extras: &DraExtras, device: &AdvertisedDevice, dra: &mut DraDevice) {
    let device_id = &device.device.device_id;
    if let Some(layout) = extras.devices.get(device_id) {
        dra.consumes_counters = layout.consumes_counters.iter().map(consumption).collect();
        dra.capacity = layout.capacity.iter().map(capacity).collect();
        dra.allow_multiple_allocations = layout.allow_multiple_allocations;
    }
    merge_guest_taints(driver, extras, device_id, &mut dra.taints);
}

/// Puts the `device-taints` guest's taints of `device_id` before the
/// health taint in `taints`, which stays unless the guest used its key.
fn merge_guest_taints(
    driver: &str,
    extras: &DraExtras,
    device_id: &str,
    taints: &mut Vec<DeviceTaint>,
) {
    let Some(guest) = extras.taints.get(device_id) else {
        return;
    };
    let health = std::mem::take(taints);
    *taints = guest.iter().map(|t| guest_taint(driver, t)).collect();
    for taint in health {
        if !taints.iter().any(|t| t.key == taint.key) {
            taints.push(taint);
        }
    }
}

/// A partition as a DRA device: its parent's attributes, health and
/// taints, then its own attributes, counters and capacity.
pub(crate) fn partition_device(
    driver: &str,
    extras: &DraExtras,
    parent: &AdvertisedDevice,
    partition: &wit::Partition,
    problems: &mut Vec<DeviceProblem>,
) -> Option<DraDevice> {
    // A partition's ID is a DNS label already (the layout check saw to
    // it): it is its DRA name as it is.
    let name = partition.id.clone();
    let parent_name = naming::device_name(parent.id()).ok()?;
    let mut dra = DraDevice::new(name);
    // The partition's own attributes come as a device of their own would
    // have them; they override the parent's of the same key.
    let mut own = parent.clone();
    own.device.id = partition.id.clone();
    own.device.attributes = partition.attributes.clone();
    own.device.numa_nodes = Vec::new();
    let mut attributes = device_attributes(driver, parent, problems);
    for (key, value) in device_attributes(driver, &own, problems) {
        if attributes.len() >= MAX_ATTRIBUTES && !attributes.contains_key(&key) {
            problems.push(DeviceProblem::AttributeDropped {
                id: partition.id.clone(),
                key,
                reason: format!("a device carries at most {MAX_ATTRIBUTES} attributes"),
            });
            continue;
        }
        attributes.insert(key, value);
    }
    dra.attributes = attributes;
    if !parent.healthy {
        dra.taints.push(unhealthy_taint(driver, &parent.reason));
    }
    merge_guest_taints(driver, extras, &parent.device.device_id, &mut dra.taints);
    dra.consumes_counters = partition
        .consumes_counters
        .iter()
        .map(consumption)
        .collect();
    dra.capacity = partition.capacity.iter().map(capacity).collect();
    dra.partition_of = Some(parent_name);
    Some(dra)
}

fn counter_set(set: &wit::CounterSet) -> CounterSet {
    CounterSet {
        name: set.name.clone(),
        counters: set
            .counters
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect(),
    }
}

fn consumption(consumption: &wit::CounterConsumption) -> CounterConsumption {
    CounterConsumption {
        counter_set: consumption.counter_set.clone(),
        counters: consumption
            .counters
            .iter()
            .map(|c| (c.name.clone(), c.value.clone()))
            .collect(),
    }
}

fn capacity(capacity: &wit::Capacity) -> (String, Capacity) {
    let request_policy = capacity.request_policy.as_ref().map(|p| CapacityPolicy {
        default: p.default.clone(),
        valid_values: p.valid_values.clone(),
        valid_range: p.valid_range.as_ref().map(|r| CapacityRange {
            min: r.min.clone(),
            max: r.max.clone(),
            step: r.step.clone(),
        }),
    });
    (
        capacity.name.clone(),
        Capacity {
            value: capacity.value.clone(),
            request_policy,
        },
    )
}

/// A guest's taint as published: an unqualified key gets `<driver>/`.
fn guest_taint(driver: &str, taint: &wit::DeviceTaintV2) -> DeviceTaint {
    DeviceTaint {
        key: if taint.key.contains('/') {
            taint.key.clone()
        } else {
            format!("{driver}/{}", taint.key)
        },
        value: taint.value.clone(),
        effect: match taint.effect {
            wit::TaintEffectV2::None => TaintEffect::None,
            wit::TaintEffectV2::NoSchedule => TaintEffect::NoSchedule,
            wit::TaintEffectV2::NoExecute => TaintEffect::NoExecute,
        },
    }
}

/// One advertised device as a DRA device; `None` (with a problem pushed)
/// when its ID has no DRA name.
pub fn dra_device(
    driver: &str,
    device: &AdvertisedDevice,
    problems: &mut Vec<DeviceProblem>,
) -> Option<DraDevice> {
    let id = device.id();
    let name = match naming::device_name(id) {
        Ok(name) => name,
        Err(error) => {
            problems.push(DeviceProblem::Unnamed {
                id: id.to_owned(),
                reason: error.to_string(),
            });
            return None;
        }
    };
    let mut dra = DraDevice::new(name);
    dra.attributes = device_attributes(driver, device, problems);
    if !device.healthy {
        dra.taints.push(unhealthy_taint(driver, &device.reason));
    }
    Some(dra)
}

/// The DRA attributes of one device (see the module docs).
pub fn device_attributes(
    driver: &str,
    device: &AdvertisedDevice,
    problems: &mut Vec<DeviceProblem>,
) -> BTreeMap<String, AttributeValue> {
    let id = device.id();
    let mut drop = |key: &str, reason: String| {
        problems.push(DeviceProblem::AttributeDropped {
            id: id.to_owned(),
            key: key.to_owned(),
            reason,
        });
    };
    let mut attributes = BTreeMap::new();
    for (name, value) in standard_attributes(&device.device) {
        attributes.insert(name.to_owned(), value);
    }
    // Which original key each identifier came from, to name collisions.
    let mut origin: BTreeMap<String, &str> = BTreeMap::new();
    for (key, value) in &device.device.attributes {
        let Some(identifier) = attribute_id(key) else {
            drop(key, "the key has no letter, digit or underscore".to_owned());
            continue;
        };
        if let Some(first) = origin.get(&identifier) {
            drop(
                key,
                format!("its identifier {identifier:?} is already taken by {first:?}"),
            );
            continue;
        }
        let value = match attribute_value(value) {
            Ok(value) => value,
            // Behind PCIe switches the path outgrows a string attribute;
            // what a claim can use of it is published as the root.
            Err(_) if key == PCI_PATH_FACT && attributes.contains_key(PCIE_ROOT) => continue,
            Err(reason) => {
                drop(key, reason);
                continue;
            }
        };
        if attributes.len() >= MAX_ATTRIBUTES {
            drop(
                key,
                format!("a device carries at most {MAX_ATTRIBUTES} attributes"),
            );
            continue;
        }
        origin.insert(identifier.clone(), key);
        attributes.insert(format!("{driver}/{identifier}"), value);
    }
    attributes
}

/// A device attribute key as a DRA attribute identifier (a C identifier
/// of at most [`MAX_ATTRIBUTE_ID`] characters): characters outside
/// `[A-Za-z0-9_]` become `_`, letters are lower-cased, a leading digit gets
/// a `_` in front. `pci.vendor` → `pci_vendor`, `0x.Foo` → `_0x_foo`.
/// `None` when nothing of the key is usable (it is empty or only
/// separators).
pub fn attribute_id(key: &str) -> Option<String> {
    if !key.chars().any(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut id: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if id.starts_with(|c: char| c.is_ascii_digit()) {
        id.insert(0, '_');
    }
    id.truncate(MAX_ATTRIBUTE_ID);
    Some(id)
}

/// A device attribute's string value as a typed DRA value: `true` /
/// `false` → bool; a decimal `i64` → int; a semantic version
/// (semver.org 2.0.0, no leading `v`) of at most [`MAX_ATTRIBUTE_VALUE`]
/// characters → version; anything else → string. A string longer than
/// [`MAX_ATTRIBUTE_VALUE`] characters is refused with the reason.
pub fn attribute_value(value: &str) -> Result<AttributeValue, String> {
    match value {
        "true" => return Ok(AttributeValue::Bool(true)),
        "false" => return Ok(AttributeValue::Bool(false)),
        _ => {}
    }
    if is_decimal(value)
        && let Ok(number) = value.parse::<i64>()
    {
        return Ok(AttributeValue::Int(number));
    }
    let length = value.chars().count();
    if length <= MAX_ATTRIBUTE_VALUE && semver::Version::parse(value).is_ok() {
        return Ok(AttributeValue::Version(value.to_owned()));
    }
    if length > MAX_ATTRIBUTE_VALUE {
        return Err(format!(
            "its value is {length} characters long, more than the {MAX_ATTRIBUTE_VALUE} a DRA string attribute may hold"
        ));
    }
    Ok(AttributeValue::String(value.to_owned()))
}

/// Whether `value` is written as a plain decimal number: an optional `-`
/// and digits (so `+5`, `0x10` and ` 7` stay strings).
fn is_decimal(value: &str) -> bool {
    let digits = value.strip_prefix('-').unwrap_or(value);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// The key of the taint an unhealthy device carries: `<driver>/unhealthy`.
pub fn unhealthy_taint_key(driver: &str) -> String {
    format!("{driver}/{UNHEALTHY_TAINT_NAME}")
}

/// The taint of an unhealthy device with this health reason.
pub fn unhealthy_taint(driver: &str, reason: &str) -> DeviceTaint {
    DeviceTaint {
        key: unhealthy_taint_key(driver),
        value: taint_value(reason),
        effect: TaintEffect::NoSchedule,
    }
}

/// A health reason as a label value: runs of characters outside
/// `[A-Za-z0-9_.-]` become one `-`, at most [`MAX_TAINT_VALUE`]
/// characters, starting and ending with a letter or digit;
/// [`NO_REASON_TAINT_VALUE`] when nothing usable is left.
/// `"GPU fell off the bus (Xid 79)"` → `GPU-fell-off-the-bus-Xid-79`.
pub fn taint_value(reason: &str) -> String {
    let mut slug = String::with_capacity(reason.len().min(MAX_TAINT_VALUE));
    let mut pending_dash = false;
    for c in reason.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
            if pending_dash && !slug.is_empty() {
                slug.push('-');
            }
            pending_dash = false;
            slug.push(c);
        } else {
            pending_dash = true;
        }
        if slug.len() >= MAX_TAINT_VALUE {
            break;
        }
    }
    slug.truncate(MAX_TAINT_VALUE);
    let trimmed = slug.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        NO_REASON_TAINT_VALUE.to_owned()
    } else {
        trimmed.to_owned()
    }
}

#[cfg(test)]
#[path = "devices_tests.rs"]
mod tests;
