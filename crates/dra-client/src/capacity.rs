//! Checks of device capacities and their request policies (KEP-5075).
//!
//! A capacity is named like an attribute (`[domain/]identifier`) and holds a
//! non-negative quantity. Only a device with `allow_multiple_allocations`
//! may give a capacity a request policy, and the policy has at most one of
//! `valid_values` (at most 10, ascending, each at most the capacity) and
//! `valid_range` (`0 ≤ min ≤ max ≤ value`, `step > 0`, `min + step ≤ value`,
//! `max` a whole number of steps above `min`); either needs a `default`
//! among the valid values, or in the range and on a step. Each problem is
//! reported through a callback as (field, why).

use std::collections::BTreeSet;

use crate::counters::amount_problem;
use crate::device::{Capacity, CapacityPolicy, CapacityRange, DraDevice};
use crate::keys::{attribute_key_problem, qualified_attribute_key};
use wdp_k8s_naming::Quantity;

/// At most this many valid values in a request policy.
pub const MAX_CAPACITY_VALID_VALUES: usize = 10;

/// Reports the problems of `device`'s capacities (fields relative to the device).
pub(crate) fn check_capacities(
    driver: &str,
    device: &DraDevice,
    report: &mut impl FnMut(String, String),
) {
    let mut qualified_keys = BTreeSet::new();
    for (name, capacity) in &device.capacity {
        let field = format!("capacity[{name:?}]");
        if let Some(problem) = attribute_key_problem(name) {
            report(field.clone(), problem);
        }
        let qualified = qualified_attribute_key(driver, name);
        if !qualified_keys.insert(qualified.clone()) {
            report(
                field.clone(),
                format!("another capacity is also written as {qualified:?}"),
            );
        }
        check_capacity(device, capacity, &field, report);
    }
}

fn check_capacity(
    device: &DraDevice,
    capacity: &Capacity,
    field: &str,
    report: &mut impl FnMut(String, String),
) {
    if let Some(problem) = amount_problem(&capacity.value) {
        report(format!("{field}.value"), problem);
    }
    let Some(policy) = &capacity.request_policy else {
        return;
    };
    let field = format!("{field}.requestPolicy");
    if !device.allow_multiple_allocations {
        report(
            field,
            "only a device with allowMultipleAllocations may have a request policy".to_owned(),
        );
        return;
    }
    // Comparisons need the capacity; its own problem is reported above.
    let Ok(value) = Quantity::parse(&capacity.value) else {
        return;
    };
    check_policy(policy, value, &field, report);
}

/// Parses `text` as the quantity of `field`, reporting why it is not one.
fn amount(text: &str, field: String, report: &mut impl FnMut(String, String)) -> Option<Quantity> {
    match amount_problem(text) {
        Some(problem) => {
            report(field, problem);
            None
        }
        None => Quantity::parse(text).ok(),
    }
}

fn check_policy(
    policy: &CapacityPolicy,
    value: Quantity,
    field: &str,
    report: &mut impl FnMut(String, String),
) {
    let default = match &policy.default {
        Some(text) => amount(text, format!("{field}.default"), report).map(|q| (text, q)),
        None => None,
    };
    let has_values = !policy.valid_values.is_empty();
    if has_values && policy.valid_range.is_some() {
        report(
            field.to_owned(),
            "only one of validValues and validRange may be set".to_owned(),
        );
        return;
    }
    if (has_values || policy.valid_range.is_some()) && policy.default.is_none() {
        report(
            format!("{field}.default"),
            "required with validValues or validRange".to_owned(),
        );
    }
    if has_values {
        check_valid_values(policy, value, default, field, report);
    }
    if let Some(range) = &policy.valid_range {
        check_range(
            range,
            value,
            default,
            &format!("{field}.validRange"),
            report,
        );
    }
}

fn check_valid_values(
    policy: &CapacityPolicy,
    value: Quantity,
    default: Option<(&String, Quantity)>,
    field: &str,
    report: &mut impl FnMut(String, String),
) {
    let values = &policy.valid_values;
    if values.len() > MAX_CAPACITY_VALID_VALUES {
        report(
            format!("{field}.validValues"),
            format!(
                "{} values, more than the {MAX_CAPACITY_VALID_VALUES} allowed",
                values.len()
            ),
        );
        return;
    }
    let mut previous: Option<Quantity> = None;
    let mut parsed = Vec::new();
    for (index, text) in values.iter().enumerate() {
        let item = format!("{field}.validValues[{index}]");
        let Some(amount) = amount(text, item.clone(), report) else {
            continue;
        };
        if amount > value {
            report(item.clone(), format!("{text} is more than the capacity"));
        }
        match previous {
            Some(before) if before == amount => {
                report(item, format!("{text} is listed twice"));
            }
            Some(before) if before > amount => {
                report(item, format!("{text} is out of order: values must ascend"));
            }
            _ => {}
        }
        previous = Some(amount);
        parsed.push(amount);
    }
    if let Some((text, default)) = default
        && !parsed.contains(&default)
    {
        report(
            format!("{field}.default"),
            format!("{text} is not one of validValues"),
        );
    }
}

fn check_range(
    range: &CapacityRange,
    value: Quantity,
    default: Option<(&String, Quantity)>,
    field: &str,
    report: &mut impl FnMut(String, String),
) {
    let Some(min) = amount(&range.min, format!("{field}.min"), report) else {
        return;
    };
    if min > value {
        report(
            format!("{field}.min"),
            format!("{} is more than the capacity", range.min),
        );
    }
    let max = match &range.max {
        Some(text) => {
            let max = amount(text, format!("{field}.max"), report);
            if let Some(max) = max {
                if min > max {
                    report(
                        format!("{field}.max"),
                        format!("{text} is less than min {}", range.min),
                    );
                }
                if max > value {
                    report(
                        format!("{field}.max"),
                        format!("{text} is more than the capacity"),
                    );
                }
            }
            max.map(|q| (text, q))
        }
        None => None,
    };
    if let Some((text, default)) = default {
        if default < min {
            report(
                format!("{field}.default"),
                format!("{text} is less than min {}", range.min),
            );
        }
        if let Some((max_text, max)) = max
            && default > max
        {
            report(
                format!("{field}.default"),
                format!("{text} is more than max {max_text}"),
            );
        }
    }
    let Some(step_text) = &range.step else {
        return;
    };
    let Some(step) = amount(step_text, format!("{field}.step"), report) else {
        return;
    };
    if step <= Quantity::ZERO {
        report(format!("{field}.step"), "must be more than zero".to_owned());
        return;
    }
    if min.checked_add(step).is_none_or(|next| next > value) {
        report(
            format!("{field}.step"),
            format!(
                "min {} plus one step {step_text} is more than the capacity",
                range.min
            ),
        );
    }
    if let Some((text, default)) = default
        && !default.is_step_from(min, step)
    {
        report(
            format!("{field}.default"),
            format!(
                "{text} is not a whole number of steps ({step_text}) above min {}",
                range.min
            ),
        );
    }
    if let Some((text, max)) = max
        && !max.is_step_from(min, step)
    {
        report(
            format!("{field}.max"),
            format!(
                "{text} is not a whole number of steps ({step_text}) above min {}",
                range.min
            ),
        );
    }
}

#[cfg(test)]
#[path = "capacity_tests.rs"]
mod tests;
