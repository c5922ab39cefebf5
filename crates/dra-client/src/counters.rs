//! Checks of counter sets and of what devices consume from them (KEP-4815).
//!
//! A counter set has a DNS-label name and 1 to 32 counters, each named by a
//! DNS label and holding a non-negative quantity. A device consumes from a
//! counter set of its pool at most once, naming only counters of that set
//! and never more of one than the set has; a 1.34 server allows 32 consumed
//! counters per device in all, a 1.35 one 2 consumptions of up to 32 counters.
//! Each problem is reported through a callback as (field, why).

use std::collections::{BTreeMap, BTreeSet};

use crate::device::{CounterConsumption, DraDevice};
use crate::pool::CounterSet;
use crate::version::ServerVersion;
use wdp_k8s_naming::Quantity;
use wdp_k8s_naming::dns_label_problem;

/// Why `text` is not a non-negative quantity, or `None`.
pub(crate) fn amount_problem(text: &str) -> Option<String> {
    match Quantity::parse(text) {
        Err(error) => Some(format!("not a quantity: {error}")),
        Ok(amount) if amount.is_negative() => Some(format!("{text:?} is negative")),
        Ok(_) => None,
    }
}

/// Reports the problems of `set` itself (field relative to the set).
pub(crate) fn check_counter_set(
    set: &CounterSet,
    version: ServerVersion,
    report: &mut impl FnMut(&str, String),
) {
    if let Some(problem) = dns_label_problem(&set.name) {
        report(".name", format!("not a DNS label: {problem}"));
    }
    let max = version.limits().max_counters_per_set;
    if set.counters.is_empty() {
        report(
            ".counters",
            "a counter set needs at least one counter".to_owned(),
        );
    } else if set.counters.len() > max {
        report(
            ".counters",
            format!(
                "{} counters, more than the {max} a counter set may have",
                set.counters.len()
            ),
        );
    }
    for (name, value) in &set.counters {
        let field = format!(".counters[{name:?}]");
        if let Some(problem) = dns_label_problem(name) {
            report(&field, format!("not a DNS label: {problem}"));
        }
        if let Some(problem) = amount_problem(value) {
            report(&format!("{field}.value"), problem);
        }
    }
}

/// A counter set as the device checks see it: whether it is kept.
pub(crate) struct KnownSet<'a> {
    /// The set.
    pub set: &'a CounterSet,
    /// Whether it passed its own checks (a device consuming from a set that
    /// is left out must be left out too).
    pub valid: bool,
}

/// Reports the problems of `device`'s consumptions against the pool's
/// counter sets `sets` (by name), on a server of `version`.
pub(crate) fn check_consumptions(
    device: &DraDevice,
    sets: &BTreeMap<&str, KnownSet<'_>>,
    version: ServerVersion,
    report: &mut impl FnMut(String, String),
) {
    let consumptions = &device.consumes_counters;
    check_consumption_totals(consumptions, version, report);
    let max_counters = version.limits().max_counters_per_consumption;
    let mut seen = BTreeSet::new();
    for (index, consumption) in consumptions.iter().enumerate() {
        let prefix = format!("consumesCounters[{index}]");
        let set_name = consumption.counter_set.as_str();
        if !seen.insert(set_name) {
            report(
                format!("{prefix}.counterSet"),
                format!("another consumption of this device names counter set {set_name:?}"),
            );
        }
        if let Some(problem) = dns_label_problem(set_name) {
            report(
                format!("{prefix}.counterSet"),
                format!("not a DNS label: {problem}"),
            );
        }
        if consumption.counters.is_empty() {
            report(
                format!("{prefix}.counters"),
                "a consumption needs at least one counter".to_owned(),
            );
        } else if consumption.counters.len() > max_counters {
            report(
                format!("{prefix}.counters"),
                format!(
                    "{} counters, more than the {} a consumption may name",
                    consumption.counters.len(),
                    max_counters
                ),
            );
        }
        let known = sets.get(set_name);
        match known {
            None => report(
                format!("{prefix}.counterSet"),
                format!("the pool has no counter set named {set_name:?}"),
            ),
            Some(known) if !known.valid => report(
                format!("{prefix}.counterSet"),
                format!("the counter set {set_name:?} is left out for its own problems"),
            ),
            Some(_) => {}
        }
        check_consumed_counters(&prefix, consumption, known, report);
    }
}

/// Reports a device consuming from more counter sets, or more counters in
/// all, than a server of `version` allows.
fn check_consumption_totals(
    consumptions: &[CounterConsumption],
    version: ServerVersion,
    report: &mut impl FnMut(String, String),
) {
    let limits = version.limits();
    if let Some(max) = limits.max_consumptions_per_device
        && consumptions.len() > max
    {
        report(
            "consumesCounters".to_owned(),
            format!(
                "consumes from {} counter sets, more than the {max} a {version} server allows",
                consumptions.len()
            ),
        );
    }
    let total: usize = consumptions.iter().map(|c| c.counters.len()).sum();
    if let Some(max) = limits.max_consumed_counters_per_device
        && total > max
    {
        report(
            "consumesCounters".to_owned(),
            format!(
                "consumes {total} counters in all, more than the {max} a {version} server allows"
            ),
        );
    }
}

/// Reports the problems of each counter `consumption` names (fields under
/// `prefix`): its name and amount, and, when its set is `known` and
/// valid, a counter the set lacks or an amount above the set's.
fn check_consumed_counters(
    prefix: &str,
    consumption: &CounterConsumption,
    known: Option<&KnownSet<'_>>,
    report: &mut impl FnMut(String, String),
) {
    let set_name = consumption.counter_set.as_str();
    for (name, value) in &consumption.counters {
        let field = format!("{prefix}.counters[{name:?}]");
        if let Some(problem) = dns_label_problem(name) {
            report(field.clone(), format!("not a DNS label: {problem}"));
        }
        if let Some(problem) = amount_problem(value) {
            report(format!("{field}.value"), problem);
            continue;
        }
        let Some(known) = known.filter(|known| known.valid) else {
            continue;
        };
        match known.set.counters.get(name) {
            None => report(
                field,
                format!("counter set {set_name:?} has no counter named {name:?}"),
            ),
            Some(available) => {
                let (Ok(wanted), Ok(has)) = (Quantity::parse(value), Quantity::parse(available))
                else {
                    continue;
                };
                if wanted > has {
                    report(
                        format!("{field}.value"),
                        format!(
                            "consumes {value}, more than the {available} counter set {set_name:?} has"
                        ),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "counters_tests.rs"]
mod tests;
