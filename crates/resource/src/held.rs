//! What prepared DRA claims hold of a resource's layout, so that no
//! published name comes to mean other hardware while a claim holds it.
//!
//! A claim holds the names of the devices it was prepared with: a whole
//! device's name is its device ID made a DNS label (reversible, so it can
//! only ever mean that device), a partition's name is its ID, which the
//! `dra-layout` guest chooses, and the counter sets the held devices draw
//! on are named by that guest too. The DRA driver tells the resource what
//! its prepared claims hold ([`crate::Resource::hold`]); [`HeldLayout`]
//! records, for each held partition, the advertised device it is part of
//! and, for each counter set a held device or partition draws on, the
//! advertised devices (the hardware) drawing on it. A new layout is then
//! checked by [`HeldLayout::check`]: a held partition now part of another
//! device, or a counter set a held device draws on now drawn on by other
//! hardware, refuses the layout with the name and both hardware IDs, and
//! the last good layout keeps serving, on every path (start, reload,
//! refresh). A held name the new layout leaves out is no move: the device
//! is gone from the slices, and the claim keeps what it was given.

use std::collections::{BTreeMap, BTreeSet};

use wdp_policy::types::{CounterConsumption, Layout};

use crate::dra_layout::DraExtras;

/// One device a prepared claim holds.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct HeldDevice {
    /// The host's device ID: an advertised device's, or a partition's.
    pub device_id: String,
    /// For a partition: the advertised device it is part of.
    pub partition_of: Option<String>,
}

/// What the prepared claims hold, with the hardware each held name means.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HeldLayout {
    /// Held partitions: partition ID → the advertised device it is on.
    partitions: BTreeMap<String, String>,
    /// Counter sets a held device or partition draws on → the advertised
    /// devices drawing on it when it was last recorded.
    counter_sets: BTreeMap<String, BTreeSet<String>>,
}

impl HeldLayout {
    /// What `held` holds in the layout being served (`extras`).
    pub fn new<'a>(held: impl IntoIterator<Item = &'a HeldDevice>, extras: &DraExtras) -> Self {
        let mut partitions = BTreeMap::new();
        let mut drawn_on: BTreeSet<&str> = BTreeSet::new();
        for device in held {
            if let Some(parent) = &device.partition_of {
                partitions.insert(device.device_id.clone(), parent.clone());
            }
            let consumes = match extras.partitions.get(&device.device_id) {
                Some(partition) => &partition.consumes_counters,
                None => match extras.devices.get(&device.device_id) {
                    Some(layout) => &layout.consumes_counters,
                    None => continue,
                },
            };
            drawn_on.extend(consumes.iter().map(|c| c.counter_set.as_str()));
        }
        let hardware = counter_set_hardware(
            extras
                .devices
                .values()
                .map(|d| (d.id.as_str(), &d.consumes_counters))
                .chain(
                    extras
                        .partitions
                        .values()
                        .map(|p| (p.parent.as_str(), &p.consumes_counters)),
                ),
        );
        let counter_sets = drawn_on
            .into_iter()
            .filter_map(|set| Some((set.to_owned(), hardware.get(set)?.clone())))
            .collect();
        Self {
            partitions,
            counter_sets,
        }
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty() && self.counter_sets.is_empty()
    }

    /// Refuses `layout` when it would move a held name to other hardware
    /// (see the module docs); the error names the name and both hardware
    /// IDs.
    pub fn check(&self, layout: &Layout) -> Result<(), String> {
        if self.is_empty() {
            return Ok(());
        }
        for partition in &layout.partitions {
            if let Some(held_on) = self.partitions.get(&partition.id)
                && *held_on != partition.parent
            {
                return Err(format!(
                    "partition \"{}\" is held by a prepared claim on device {held_on}, and the layout puts it on device {}: a published name may not come to mean other hardware while a claim holds it",
                    partition.id, partition.parent
                ));
            }
        }
        let hardware = counter_set_hardware(
            layout
                .devices
                .iter()
                .map(|d| (d.id.as_str(), &d.consumes_counters))
                .chain(
                    layout
                        .partitions
                        .iter()
                        .map(|p| (p.parent.as_str(), &p.consumes_counters)),
                ),
        );
        for (set, held_on) in &self.counter_sets {
            if let Some(now) = hardware.get(set.as_str())
                && now != held_on
            {
                return Err(format!(
                    "counter set \"{set}\" is drawn on by a prepared claim's device on {}, and the layout has it drawn on by {}: a published name may not come to mean other hardware while a claim holds it",
                    join(held_on),
                    join(now)
                ));
            }
        }
        Ok(())
    }
}

/// Per counter set, the advertised devices drawing on it: a device
/// directly, a partition through the device it is part of.
fn counter_set_hardware<'a>(
    consumers: impl Iterator<Item = (&'a str, &'a Vec<CounterConsumption>)>,
) -> BTreeMap<&'a str, BTreeSet<String>> {
    let mut hardware: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (device, consumes) in consumers {
        for consumption in consumes {
            hardware
                .entry(consumption.counter_set.as_str())
                .or_default()
                .insert(device.to_owned());
        }
    }
    hardware
}

fn join(devices: &BTreeSet<String>) -> String {
    let names: Vec<&str> = devices.iter().map(String::as_str).collect();
    match names.len() {
        1 => format!("device {}", names[0]),
        _ => format!("devices {}", names.join(", ")),
    }
}

#[cfg(test)]
#[path = "held_tests.rs"]
mod tests;
