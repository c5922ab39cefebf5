//! Device capacities: keys, and the consumable-capacity request policy
//! (`capacity[*].requestPolicy`), which only a device with `allowMultipleAllocations: true` may
//! carry. A policy has either `validValues` (at most 10, sorted ascending, each within the
//! capacity, the `default` among them) or a `validRange` (`min` ≤ `max` ≤ the capacity value,
//! `default` inside, a positive `step` that `default` and `max` are whole steps from `min`).
//!
//! As the real server does, a device whose capacities are unchanged from the stored object is
//! not checked again.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, Device, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::field::{duplicate, forbidden, invalid, required, too_many};
use super::keys::validate_qualified_key;
use super::quantity::Quantity;
use crate::status::FieldError;

/// Entries of `validValues`.
const MAX_VALID_VALUES: usize = 10;

/// Validates the capacities of `device` at `path` (`spec.devices[i]`); `old` is the device of
/// the same name in the stored slice.
pub(crate) fn validate_capacity(
    device: &Device,
    old: Option<&Device>,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(capacity) = &device.capacity else {
        return;
    };
    for key in capacity.keys() {
        validate_qualified_key(key, &format!("{path}.capacity[{key}]"), errors);
    }
    if old.is_some_and(|old| old.capacity == device.capacity) {
        return;
    }
    let multiple = device.allow_multiple_allocations == Some(true);
    for (key, entry) in capacity {
        let Some(policy) = &entry.request_policy else {
            continue;
        };
        let policy_path = format!("{path}.capacity[{key}].requestPolicy");
        if multiple {
            validate_policy(entry, policy, &policy_path, errors);
        } else {
            errors.push(forbidden(
                policy_path,
                "allowMultipleAllocations must be true",
            ));
        }
    }
}

fn parse(quantity: &ApiQuantity) -> Option<Quantity> {
    // The body was refused earlier when a quantity does not parse.
    Quantity::parse(&quantity.0).ok()
}

fn validate_policy(
    capacity: &DeviceCapacity,
    policy: &CapacityRequestPolicy,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let Some(value) = parse(&capacity.value) else {
        return;
    };
    let values = policy.valid_values.as_deref().unwrap_or_default();
    if !values.is_empty() && policy.valid_range.is_some() {
        errors.push(forbidden(
            path,
            "exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time",
        ));
        return;
    }
    let default = policy.default.as_ref();
    if !values.is_empty() {
        match default {
            None => errors.push(required(
                format!("{path}.default"),
                "required when validValues is defined",
            )),
            Some(default) => validate_values(&capacity.value, value, default, values, path, errors),
        }
    } else if let Some(range) = &policy.valid_range {
        let range_path = format!("{path}.validRange");
        match default {
            None => errors.push(required(
                format!("{path}.default"),
                "required when validRange is defined",
            )),
            Some(default) => {
                validate_range(&capacity.value, value, default, range, &range_path, errors)
            }
        }
    }
}

fn validate_values(
    capacity_text: &ApiQuantity,
    capacity: Quantity,
    default_text: &ApiQuantity,
    values: &[ApiQuantity],
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let path = format!("{path}.validValues");
    let parsed: Vec<Option<Quantity>> = values.iter().map(parse).collect();
    for i in 1..parsed.len() {
        if let (Some(before), Some(after)) = (parsed[i - 1], parsed[i])
            && before > after
        {
            errors.push(invalid(
                format!("{path}[{i}]"),
                &values[i].0,
                "values must be sorted in ascending order",
            ));
        }
    }
    let default = parse(default_text);
    let mut found_default = false;
    if values.len() > MAX_VALID_VALUES {
        // The real server stops at the size, so it finds no default either.
        errors.push(too_many(&path, values.len(), MAX_VALID_VALUES));
    } else {
        let mut seen = BTreeSet::new();
        for (i, (text, option)) in values.iter().zip(&parsed).enumerate() {
            let Some(option) = option else { continue };
            if *option > capacity {
                errors.push(invalid(
                    format!("{path}[{i}]"),
                    &text.0,
                    format!("option is larger than capacity value: {}", capacity_text.0),
                ));
            }
            if Some(*option) == default {
                found_default = true;
            }
            if !seen.insert(*option) {
                errors.push(duplicate(format!("{path}[{i}]"), &text.0));
            }
        }
    }
    if !found_default {
        errors.push(invalid(
            path,
            &default_text.0,
            "default value is not valid according to the requestPolicy",
        ));
    }
}

fn validate_range(
    capacity_text: &ApiQuantity,
    capacity: Quantity,
    default_text: &ApiQuantity,
    range: &k8s_openapi::api::resource::v1::CapacityRequestPolicyRange,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let (Some(min), Some(default)) = (parse(&range.min), parse(default_text)) else {
        return;
    };
    let cap = &capacity_text.0;
    if min > capacity {
        errors.push(invalid(
            format!("{path}.min"),
            &range.min.0,
            format!("min is larger than capacity value: {cap}"),
        ));
    }
    if default < min {
        errors.push(invalid(
            format!("{path}.default"),
            &default_text.0,
            format!("default is less than min: {}", range.min.0),
        ));
    }
    let max = range.max.as_ref().and_then(|m| parse(m).map(|q| (m, q)));
    if let Some((max_text, max)) = max {
        if min > max {
            errors.push(invalid(
                format!("{path}.max"),
                &range.min.0,
                format!("min is larger than max: {}", max_text.0),
            ));
        }
        if max > capacity {
            errors.push(invalid(
                format!("{path}.max"),
                &max_text.0,
                format!("max is larger than capacity value: {cap}"),
            ));
        }
        if default > max {
            errors.push(invalid(
                format!("{path}.default"),
                &default_text.0,
                format!("default is more than max: {}", max_text.0),
            ));
        }
    }
    let Some((step_text, step)) = range.step.as_ref().and_then(|s| parse(s).map(|q| (s, q))) else {
        return;
    };
    let step_path = format!("{path}.step");
    if !step.is_positive() {
        errors.push(invalid(
            &step_path,
            &step_text.0,
            "must be greater than zero",
        ));
        return;
    }
    if min
        .checked_add(step)
        .is_some_and(|one_step| one_step > capacity)
    {
        errors.push(invalid(
            &step_path,
            &step_text.0,
            format!("one step is larger than capacity value: {cap}"),
        ));
    }
    let named = BTreeMap::from([
        ("default", Some((default_text, default))),
        ("min", Some((&range.min, min))),
        ("max", max),
    ]);
    let mut negative = false;
    for (name, entry) in &named {
        if let Some((text, q)) = entry
            && q.is_negative()
        {
            errors.push(invalid(
                format!("{path}.{name}"),
                &text.0,
                "must be greater than or equal to 0",
            ));
            negative = true;
        }
    }
    if negative {
        return;
    }
    for (text, q) in [Some((default_text, default)), max].into_iter().flatten() {
        if q.is_step_from(min, step) == Some(false) {
            errors.push(invalid(
                &step_path,
                &text.0,
                format!(
                    "value is not a multiple of a given step ({}) from ({})",
                    step_text.0, range.min.0
                ),
            ));
        }
    }
}
