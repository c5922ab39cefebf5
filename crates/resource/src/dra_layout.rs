//! The DRA-only facts of a device set (WIT 0.1.2): the layout a
//! `dra-layout` guest describes — counter sets, each device's counter
//! consumption and capacity, and partitions (devices of their own made of
//! part of an advertised device) — and the taints a `device-taints` guest
//! adds (through `device-taints-v2`, WIT 0.1.3, when the guest exports it:
//! the `none` effect and up to [`MAX_GUEST_TAINTS_V2`] taints a device).
//! A device-plugin resource, or a DRA resource without those hooks, has
//! none: its devices are published whole.
//!
//! How many taints a device may carry, and whether the `none` effect, also
//! depends on the API server (4 and no `none` on 1.34, 16 and `none` from
//! 1.35 on): the DRA driver, which learns the server's version, fits the
//! taints checked here to it.
//!
//! [`check_layout`] and [`check_taints`] are the host's checks of the
//! guests' answers: a layout that names unknown devices, counter sets or
//! counters, consumes more than a set holds, repeats a name, has a value
//! that is not a quantity (read by `wdp_k8s_naming::quantity`, the same
//! reader the publisher uses) or too many of anything is refused whole
//! with the reason, and the last good layout keeps serving.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use wdp_policy::Hook;
use wdp_policy::types::{
    Capacity, CounterConsumption, CounterSet, Device, DeviceLayout, DeviceTaintV2, Layout,
    Partition, TaintedV2,
};

use wdp_k8s_naming::{Quantity, dns_label_problem, label_name_problem, label_value_problem};

/// The most partitions one resource may describe.
pub const MAX_PARTITIONS: usize = 1024;
/// The most counter sets one resource may describe.
pub(crate) const MAX_COUNTER_SETS: usize = 256;
/// The most counters in one counter set (the API's limit).
pub(crate) const MAX_COUNTERS_PER_SET: usize = 32;
/// The most counter sets one device or partition may consume from (the
/// limit of 1.35 and later API servers).
pub(crate) const MAX_CONSUMPTIONS_PER_DEVICE: usize = 2;
/// The most capacities of one device or partition.
pub(crate) const MAX_CAPACITIES: usize = 16;
/// The most attributes of one partition.
pub(crate) const MAX_PARTITION_ATTRIBUTES: usize = 32;
/// The most taints a `device-taints` guest (WIT 0.1.2) may give one
/// device: the API allowed 4, and the fourth place is kept for the health
/// taint.
pub const MAX_GUEST_TAINTS: usize = 3;
/// The most taints a `device-taints-v2` guest (WIT 0.1.3) may give one
/// device: Kubernetes 1.35+ allows 16, and the last place is kept for the
/// health taint. A 1.34 API server takes fewer (see the module docs).
pub const MAX_GUEST_TAINTS_V2: usize = 15;
/// The largest amount a counter or capacity may hold: 2^63 - 1 units,
/// far beyond any device (8 EiB of bytes).
const MAX_UNITS: i128 = i64::MAX as i128;

/// The DRA-only facts of one device set, checked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DraExtras {
    /// Counter sets, in the guest's order.
    pub counter_sets: Vec<CounterSet>,
    /// Per advertised device ID: its counters and capacity.
    pub devices: BTreeMap<String, DeviceLayout>,
    /// Partitions by ID.
    pub partitions: BTreeMap<String, Partition>,
    /// Per advertised device ID: the guest's taints (the health taint not
    /// included), as WIT 0.1.3 records whichever hook gave them.
    pub taints: BTreeMap<String, Vec<DeviceTaintV2>>,
    /// Who gave the taints, to name them in the log; `None` without a
    /// taints guest.
    pub taint_source: Option<TaintSource>,
}

/// Who gave a device set's taints: the resource, its guest and the hook
/// the guest was asked through (`device-taints` or `device-taints-v2`).
/// Displays as `resource R: guest "G" hook H`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaintSource {
    /// The resource.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook it was asked through.
    pub hook: Hook,
}

impl std::fmt::Display for TaintSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "resource {}: guest {:?} hook {}",
            self.resource, self.guest, self.hook
        )
    }
}

impl DraExtras {
    /// The extras of a checked `layout`, with no taints.
    pub fn from_layout(layout: Layout) -> Self {
        Self {
            counter_sets: layout.counter_sets,
            devices: layout
                .devices
                .into_iter()
                .map(|d| (d.id.clone(), d))
                .collect(),
            partitions: layout
                .partitions
                .into_iter()
                .map(|p| (p.id.clone(), p))
                .collect(),
            taints: BTreeMap::new(),
            taint_source: None,
        }
    }

    /// The layout these extras were made of (for a guest's `check` of the
    /// last good layout against new devices).
    pub fn layout(&self) -> Layout {
        Layout {
            counter_sets: self.counter_sets.clone(),
            devices: self.devices.values().cloned().collect(),
            partitions: self.partitions.values().cloned().collect(),
        }
    }

    /// The partition `id`, if there is one.
    pub fn partition(&self, id: &str) -> Option<&Partition> {
        self.partitions.get(id)
    }

    /// Whether the layout has nothing (no counter, capacity or partition).
    pub fn has_no_layout(&self) -> bool {
        self.counter_sets.is_empty() && self.devices.is_empty() && self.partitions.is_empty()
    }

    /// Whether the device (an advertised device ID) allows several
    /// allocations at once.
    pub fn allows_multiple_allocations(&self, device_id: &str) -> bool {
        self.devices
            .get(device_id)
            .is_some_and(|d| d.allow_multiple_allocations)
    }
}

/// Checks a `dra-layout` answer against the devices it describes (see the
/// module docs). The error names what is wrong.
pub(crate) fn check_layout(layout: &Layout, devices: &[Device]) -> Result<(), String> {
    let device_ids: BTreeSet<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    if layout.counter_sets.len() > MAX_COUNTER_SETS {
        return Err(format!(
            "{} counter sets, more than the {MAX_COUNTER_SETS} a resource may have",
            layout.counter_sets.len()
        ));
    }
    if layout.partitions.len() > MAX_PARTITIONS {
        return Err(format!(
            "{} partitions, more than the {MAX_PARTITIONS} a resource may have",
            layout.partitions.len()
        ));
    }
    let mut sets: HashMap<&str, HashMap<&str, Quantity>> = HashMap::new();
    for set in &layout.counter_sets {
        let what = format!("counter set {:?}", set.name);
        check_name(&set.name, &what)?;
        if set.counters.is_empty() || set.counters.len() > MAX_COUNTERS_PER_SET {
            return Err(format!(
                "{what} has {} counters; it needs 1 to {MAX_COUNTERS_PER_SET}",
                set.counters.len()
            ));
        }
        let mut counters = HashMap::new();
        for counter in &set.counters {
            let what = format!("counter {:?} of {what}", counter.name);
            check_name(&counter.name, &what)?;
            let value = amount(&counter.value).map_err(|e| format!("{what}: {e}"))?;
            if counters.insert(counter.name.as_str(), value).is_some() {
                return Err(format!("{what} is named twice"));
            }
        }
        if sets.insert(set.name.as_str(), counters).is_some() {
            return Err(format!("{what} is named twice"));
        }
    }
    let mut described = BTreeSet::new();
    for device in &layout.devices {
        let what = format!("device {:?}", device.id);
        if !device_ids.contains(device.id.as_str()) {
            return Err(format!("{what} is not a device discovery answered"));
        }
        if !described.insert(device.id.as_str()) {
            return Err(format!("{what} is described twice"));
        }
        check_consumption(&device.consumes_counters, &sets, &what)?;
        check_capacity(&device.capacity, device.allow_multiple_allocations, &what)?;
    }
    let mut partition_ids = BTreeSet::new();
    for partition in &layout.partitions {
        let what = format!("partition {:?}", partition.id);
        check_name(&partition.id, &what)?;
        if device_ids.contains(partition.id.as_str()) {
            return Err(format!("{what} has the ID of a device"));
        }
        if !partition_ids.insert(partition.id.as_str()) {
            return Err(format!("{what} is named twice"));
        }
        if !device_ids.contains(partition.parent.as_str()) {
            return Err(format!(
                "{what} is part of {:?}, which is not a device discovery answered",
                partition.parent
            ));
        }
        if partition.attributes.len() > MAX_PARTITION_ATTRIBUTES {
            return Err(format!(
                "{what} has {} attributes, more than {MAX_PARTITION_ATTRIBUTES}",
                partition.attributes.len()
            ));
        }
        check_consumption(&partition.consumes_counters, &sets, &what)?;
        check_capacity(&partition.capacity, false, &what)?;
    }
    Ok(())
}

/// A counter or capacity amount: a Kubernetes quantity, not negative, at
/// most [`MAX_UNITS`].
fn amount(text: &str) -> Result<Quantity, String> {
    let quantity = Quantity::parse(text).map_err(|e| e.to_string())?;
    if quantity.is_negative() {
        return Err(format!("{text:?} is negative"));
    }
    let most = Quantity::parse(&MAX_UNITS.to_string()).map_err(|e| e.to_string())?;
    if quantity > most {
        return Err(format!("{text:?} is too large"));
    }
    Ok(quantity)
}

/// A device, partition, counter-set or counter name: a DNS label.
fn check_name(name: &str, what: &str) -> Result<(), String> {
    match dns_label_problem(name) {
        None => Ok(()),
        Some(problem) => Err(format!("{what}: the name is not a DNS label: {problem}")),
    }
}

fn check_consumption(
    consumptions: &[CounterConsumption],
    sets: &HashMap<&str, HashMap<&str, Quantity>>,
    what: &str,
) -> Result<(), String> {
    if consumptions.len() > MAX_CONSUMPTIONS_PER_DEVICE {
        return Err(format!(
            "{what} consumes from {} counter sets, more than {MAX_CONSUMPTIONS_PER_DEVICE}",
            consumptions.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for consumption in consumptions {
        let Some(set) = sets.get(consumption.counter_set.as_str()) else {
            return Err(format!(
                "{what} consumes from counter set {:?}, which the layout does not have",
                consumption.counter_set
            ));
        };
        if !seen.insert(consumption.counter_set.as_str()) {
            return Err(format!(
                "{what} consumes from counter set {:?} twice",
                consumption.counter_set
            ));
        }
        for counter in &consumption.counters {
            let Some(available) = set.get(counter.name.as_str()) else {
                return Err(format!(
                    "{what} consumes counter {:?}, which counter set {:?} does not have",
                    counter.name, consumption.counter_set
                ));
            };
            let consumed = amount(&counter.value)
                .map_err(|e| format!("{what}, counter {:?}: {e}", counter.name))?;
            if consumed > *available {
                return Err(format!(
                    "{what} consumes {} of counter {:?}, more than the {} counter set {:?} holds",
                    counter.value, counter.name, available, consumption.counter_set
                ));
            }
        }
    }
    Ok(())
}

fn check_capacity(capacity: &[Capacity], shared: bool, what: &str) -> Result<(), String> {
    if capacity.len() > MAX_CAPACITIES {
        return Err(format!(
            "{what} has {} capacities, more than {MAX_CAPACITIES}",
            capacity.len()
        ));
    }
    let mut names = BTreeSet::new();
    for entry in capacity {
        let what = format!("{what}, capacity {:?}", entry.name);
        check_name(&entry.name, &what)?;
        if !names.insert(entry.name.as_str()) {
            return Err(format!("{what} is named twice"));
        }
        let value = amount(&entry.value).map_err(|e| format!("{what}: {e}"))?;
        let Some(policy) = &entry.request_policy else {
            continue;
        };
        if !shared {
            return Err(format!(
                "{what} has a request policy, which only a device that allows multiple allocations may have"
            ));
        }
        let parse = |text: &str| amount(text).map_err(|e| format!("{what}: {e}"));
        let mut last = None;
        if policy.valid_values.len() > 10 {
            return Err(format!("{what} has more than 10 valid values"));
        }
        for text in &policy.valid_values {
            let amount = parse(text)?;
            if last.is_some_and(|l| l >= amount) || amount > value {
                return Err(format!(
                    "{what}: valid values must be ascending, distinct and at most the capacity"
                ));
            }
            last = Some(amount);
        }
        if !policy.valid_values.is_empty() && policy.valid_range.is_some() {
            return Err(format!(
                "{what} has both valid values and a valid range; at most one"
            ));
        }
        let default = policy.default.as_deref().map(parse).transpose()?;
        if let Some(range) = &policy.valid_range {
            let min = parse(&range.min)?;
            let max = range.max.as_deref().map(parse).transpose()?;
            let step = range.step.as_deref().map(parse).transpose()?;
            if min > value || max.is_some_and(|m| m < min || m > value) {
                return Err(format!(
                    "{what}: the valid range must have min <= max <= the capacity"
                ));
            }
            if step == Some(Quantity::ZERO) {
                return Err(format!("{what}: the range's step must be above 0"));
            }
            match default {
                None => return Err(format!("{what}: a valid range needs a default")),
                Some(d) if d < min || max.is_some_and(|m| d > m) => {
                    return Err(format!("{what}: the default is outside the valid range"));
                }
                Some(_) => {}
            }
        }
        if !policy.valid_values.is_empty() {
            let in_values = default.is_some_and(|d| {
                policy
                    .valid_values
                    .iter()
                    .any(|v| amount(v).is_ok_and(|v| v == d))
            });
            if !in_values {
                return Err(format!(
                    "{what}: the default must be one of the valid values"
                ));
            }
        }
    }
    Ok(())
}

/// Checks a `device-taints` or `device-taints-v2` answer (`hook`): known
/// device IDs, each once, at most [`MAX_GUEST_TAINTS`] taints
/// ([`MAX_GUEST_TAINTS_V2`] through `device-taints-v2`) with a label-name
/// key, a label value and each key once.
pub(crate) fn check_taints(
    answer: &[TaintedV2],
    devices: &[Device],
    hook: Hook,
) -> Result<(), String> {
    let (max, why) = if hook == Hook::DeviceTaintsV2 {
        (
            MAX_GUEST_TAINTS_V2,
            "the API allows 16 from Kubernetes 1.35 on and the health taint needs one",
        )
    } else {
        (
            MAX_GUEST_TAINTS,
            "the API allows 4 and the health taint needs one; device-taints-v2 allows more",
        )
    };
    let device_ids: BTreeSet<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    let mut seen = BTreeSet::new();
    for tainted in answer {
        let what = format!("device {:?}", tainted.id);
        if !device_ids.contains(tainted.id.as_str()) {
            return Err(format!("{what} is not a device of the input"));
        }
        if !seen.insert(tainted.id.as_str()) {
            return Err(format!("{what} is answered twice"));
        }
        if tainted.taints.len() > max {
            return Err(format!(
                "{what} has {} taints, more than the {max} a guest may give through {hook} ({why})",
                tainted.taints.len()
            ));
        }
        let mut keys = BTreeSet::new();
        for taint in &tainted.taints {
            if let Some(problem) = label_name_problem(&taint.key) {
                return Err(format!(
                    "{what}, taint key {:?}: not a label name: {problem}",
                    taint.key
                ));
            }
            if !keys.insert(taint.key.as_str()) {
                return Err(format!("{what} has taint key {:?} twice", taint.key));
            }
            if let Some(problem) = label_value_problem(&taint.value) {
                return Err(format!(
                    "{what}, taint {:?}: the value {:?} is not a label value: {problem}",
                    taint.key, taint.value
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "dra_layout_tests.rs"]
mod tests;
