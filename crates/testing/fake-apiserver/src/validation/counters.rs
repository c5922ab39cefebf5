//! Partitionable devices: the counter sets of a ResourceSlice (`spec.sharedCounters`) and the
//! devices' counter consumptions (`spec.devices[].consumesCounters`), under the rules of the
//! served version.
//!
//! - 1.34: counter sets sit in the same slice as the devices consuming them. Set names are
//!   unique in the slice; all sets together hold at most 32 counters; a device's consumptions
//!   name at most 32 counters in all, the slice's devices at most 1024; every consumption must
//!   name a set of this slice and only counters of that set.
//! - 1.35+: a slice has either devices or counter sets. At most 8 sets of at most 32 counters
//!   each; at most 2 consumptions per device, one per set, of at most 32 counters each.
//!
//! In 1.35+ the sets a device consumes from live in other slices of the pool. The real API
//! server validates each object on its own and never looks at other slices: a consumption of a
//! set that no slice of the pool defines, or a set name defined twice in the pool, is accepted
//! by the API server and only makes the pool unusable for the scheduler. The fake does the same:
//! it checks names and sizes here, and no reference across slices.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceCounterConsumption, ResourceSliceSpec,
};

use super::field::{duplicate, invalid, invalid_unquoted, required, too_many};
use super::names::dns_label_problem;
use crate::status::FieldError;

/// 1.34: counters in all counter sets of a slice.
const MAX_SHARED_COUNTERS_1_34: usize = 32;
/// 1.34: counters consumed by one device, over all its consumptions.
const MAX_DEVICE_COUNTERS_1_34: usize = 32;
/// 1.34: counters consumed by all devices of a slice.
const MAX_SLICE_DEVICE_COUNTERS_1_34: usize = 1024;
/// 1.35+: counter sets per slice.
const MAX_COUNTER_SETS: usize = 8;
/// 1.35+: counters per counter set and per consumption.
const MAX_COUNTERS_PER_SET: usize = 32;
/// 1.35+: counter consumptions per device.
const MAX_CONSUMPTIONS_PER_DEVICE: usize = 2;

/// The counter names of each set of one slice (1.34), for checking the devices' references.
pub(crate) type SliceCounters<'a> = BTreeMap<&'a str, BTreeSet<&'a str>>;

/// The counter sets of `spec` by name.
pub(crate) fn slice_counters(spec: &ResourceSliceSpec) -> SliceCounters<'_> {
    spec.shared_counters
        .iter()
        .flatten()
        .map(|set| {
            (
                set.name.as_str(),
                set.counters.keys().map(String::as_str).collect(),
            )
        })
        .collect()
}

/// Validates `spec.sharedCounters`, and in 1.35+ that a slice has either devices or counters.
pub(crate) fn validate_counter_sets(
    spec: &ResourceSliceSpec,
    per_pool: bool,
    errors: &mut Vec<FieldError>,
) {
    const PATH: &str = "spec.sharedCounters";
    if per_pool && spec.devices.is_some() && spec.shared_counters.is_some() {
        errors.push(invalid(
            "spec",
            "",
            "only one of `sharedCounters` or `devices` is allowed",
        ));
    }
    let sets = spec.shared_counters.as_deref().unwrap_or_default();
    if per_pool && sets.len() > MAX_COUNTER_SETS {
        // The real server stops at the size, without looking at the entries.
        errors.push(too_many(PATH, sets.len(), MAX_COUNTER_SETS));
        return;
    }
    let mut names = BTreeSet::new();
    for (i, set) in sets.iter().enumerate() {
        let path = format!("{PATH}[{i}]");
        validate_set(set, &path, per_pool, errors);
        if !names.insert(set.name.as_str()) {
            let at = if per_pool {
                path
            } else {
                format!("{path}.name")
            };
            errors.push(duplicate(at, &set.name));
        }
    }
    if !per_pool {
        let total: usize = sets.iter().map(|s| s.counters.len()).sum();
        if total > MAX_SHARED_COUNTERS_1_34 {
            errors.push(invalid_unquoted(
                PATH,
                total,
                format!(
                    "the total number of shared counters must not exceed {MAX_SHARED_COUNTERS_1_34}"
                ),
            ));
        }
    }
}

fn validate_set(set: &CounterSet, path: &str, per_pool: bool, errors: &mut Vec<FieldError>) {
    validate_name(&set.name, &format!("{path}.name"), errors);
    validate_counters(&set.counters, &format!("{path}.counters"), per_pool, errors);
}

/// A counter-set name: required, a DNS label.
fn validate_name(name: &str, path: &str, errors: &mut Vec<FieldError>) {
    if name.is_empty() {
        errors.push(required(path, ""));
    } else if let Some(detail) = dns_label_problem(name) {
        errors.push(invalid(path, name, detail));
    }
}

/// A map of counters: required, at most 32 in 1.35+, each name a DNS label.
fn validate_counters(
    counters: &BTreeMap<String, Counter>,
    path: &str,
    per_pool: bool,
    errors: &mut Vec<FieldError>,
) {
    if counters.is_empty() {
        errors.push(required(path, ""));
        return;
    }
    if per_pool && counters.len() > MAX_COUNTERS_PER_SET {
        errors.push(too_many(path, counters.len(), MAX_COUNTERS_PER_SET));
        return;
    }
    for name in counters.keys() {
        if let Some(detail) = dns_label_problem(name) {
            errors.push(invalid(format!("{path}[{name}]"), name, detail));
        }
    }
}

/// Validates one device's `consumesCounters`. `slice_sets` is the slice's own counter sets in
/// 1.34, where the references must resolve in the slice, and `None` in 1.35+.
pub(crate) fn validate_consumptions(
    device: &Device,
    path: &str,
    slice_sets: Option<&SliceCounters<'_>>,
    errors: &mut Vec<FieldError>,
) {
    let Some(consumptions) = device.consumes_counters.as_deref() else {
        return;
    };
    let list_path = format!("{path}.consumesCounters");
    let per_pool = slice_sets.is_none();
    if per_pool && consumptions.len() > MAX_CONSUMPTIONS_PER_DEVICE {
        errors.push(too_many(
            list_path,
            consumptions.len(),
            MAX_CONSUMPTIONS_PER_DEVICE,
        ));
        return;
    }
    if !per_pool {
        let total: usize = consumptions.iter().map(|c| c.counters.len()).sum();
        if total > MAX_DEVICE_COUNTERS_1_34 {
            errors.push(invalid_unquoted(
                path,
                total,
                format!("the total number of counters must not exceed {MAX_DEVICE_COUNTERS_1_34}"),
            ));
        }
    }
    let mut seen = BTreeSet::new();
    for (j, consumption) in consumptions.iter().enumerate() {
        let entry = format!("{list_path}[{j}]");
        validate_name(
            &consumption.counter_set,
            &format!("{entry}.counterSet"),
            errors,
        );
        validate_counters(
            &consumption.counters,
            &format!("{entry}.counters"),
            per_pool,
            errors,
        );
        if let Some(sets) = slice_sets {
            validate_reference(consumption, &entry, sets, errors);
        }
        if !seen.insert(consumption.counter_set.as_str()) {
            let at = if per_pool {
                entry
            } else {
                format!("{entry}.counterSet")
            };
            errors.push(duplicate(at, &consumption.counter_set));
        }
    }
}

/// 1.34: the consumed set and its counters must be defined in the same slice.
fn validate_reference(
    consumption: &DeviceCounterConsumption,
    entry: &str,
    sets: &SliceCounters<'_>,
    errors: &mut Vec<FieldError>,
) {
    match sets.get(consumption.counter_set.as_str()) {
        Some(counters) => {
            for name in consumption.counters.keys() {
                if !counters.contains(name.as_str()) {
                    errors.push(invalid(
                        format!("{entry}.counters"),
                        name,
                        "must reference a counter defined in the ResourceSlice sharedCounters",
                    ));
                }
            }
        }
        None => errors.push(invalid(
            format!("{entry}.counterSet"),
            &consumption.counter_set,
            "must reference a counterSet defined in the ResourceSlice sharedCounters",
        )),
    }
}

/// 1.34: the counters consumed by all devices of the slice.
pub(crate) fn validate_slice_consumption_total(devices: &[Device], errors: &mut Vec<FieldError>) {
    let total: usize = devices
        .iter()
        .flat_map(|d| d.consumes_counters.iter().flatten())
        .map(|c| c.counters.len())
        .sum();
    if total > MAX_SLICE_DEVICE_COUNTERS_1_34 {
        errors.push(invalid_unquoted(
            "spec.devices",
            total,
            format!(
                "the total number of counters in devices must not exceed {MAX_SLICE_DEVICE_COUNTERS_1_34}"
            ),
        ));
    }
}
