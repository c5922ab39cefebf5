//! Everything the API server would reject in a pool, or the served version
//! could not hold, found before it is sent.
//!
//! The rules are those of `resource.k8s.io/v1` validation: device names are
//! unique DNS labels; a device has at most 32 attributes and capacities
//! together, each keyed `[domain/]identifier` (a C identifier of at most 32
//! characters, a domain that is a DNS subdomain of at most 63), attributes
//! holding a string or version of at most 64 characters, a version being
//! semver 2.0.0; at most 16 taints (4 on a 1.34 server), keyed by a label
//! name, valued by a label value, the effect `None` only from 1.35 on. Capacities follow [`crate::capacity`]'s rules, counter sets and
//! consumptions [`crate::counters`]', and on a 1.34 server each group of
//! counter sets with their consumers must fit one slice ([`crate::fit`]).
//!
//! [`validate_pool`] also says what to publish: the pool without the devices
//! and counter sets that have problems (and without the devices consuming a
//! counter set left out), so one bad device never holds back the rest. The
//! publisher applies it to every pool it is given; a problem missed here
//! comes back as the API server's own rejection in the publisher's status.

use std::collections::{BTreeMap, BTreeSet};

use crate::capacity::check_capacities;
use crate::counters::{KnownSet, check_consumptions, check_counter_set};
use crate::device::{AttributeValue, DraDevice, TaintEffect};
use crate::fit::check_fit;
use crate::keys::{attribute_key_problem, qualified_attribute_key};
use crate::pool::PoolContent;
use crate::problem::DeviceProblem;
use crate::version::ServerVersion;
use wdp_k8s_naming::{
    check_driver_name, dns_label_problem, label_name_problem, label_value_problem,
};

/// At most this many attributes and capacities together per device.
pub const MAX_ATTRIBUTES_PER_DEVICE: usize = 32;
pub use crate::version::MAX_TAINTS_PER_DEVICE;
/// The longest string or version attribute value, in bytes.
pub const MAX_ATTRIBUTE_VALUE_LEN: usize = 64;

/// What [`validate_pool`] found, and what is left to publish.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCheck {
    /// Every problem found, in the order of the pool's counter sets, then devices.
    pub problems: Vec<DeviceProblem>,
    /// The pool without what has problems, in the given order.
    pub content: PoolContent,
}

/// Checks `devices` of `driver` against the API server's rules; empty when
/// all is well. A device consuming counters is flagged (a plain list has no
/// counter sets): use [`validate_pool`] for partitions.
pub fn validate(driver: &str, devices: &[DraDevice]) -> Vec<DeviceProblem> {
    validate_pool(
        driver,
        &PoolContent::from_devices(devices.to_vec()),
        ServerVersion::default(),
    )
    .problems
}

/// Checks the pool `content` of `driver` against the rules of a server of
/// `version` (see the module docs), and leaves out what has problems.
pub fn validate_pool(driver: &str, content: &PoolContent, version: ServerVersion) -> PoolCheck {
    let mut problems = Vec::new();
    if let Err(error) = check_driver_name(driver) {
        problems.push(DeviceProblem {
            device: None,
            field: "driver".to_owned(),
            message: error.to_string(),
        });
    }

    let mut set_valid = vec![true; content.counter_sets.len()];
    let mut set_names = BTreeSet::new();
    for (index, set) in content.counter_sets.iter().enumerate() {
        let mut report = |field: &str, message: String| {
            problems.push(DeviceProblem::of_counter_set(&set.name, field, message));
            set_valid[index] = false;
        };
        check_counter_set(set, version, &mut report);
        if !set_names.insert(set.name.as_str()) {
            report(
                ".name",
                "another counter set of the pool has the same name".to_owned(),
            );
        }
    }
    let mut known_sets: BTreeMap<&str, KnownSet<'_>> = BTreeMap::new();
    for (set, &valid) in content.counter_sets.iter().zip(&set_valid) {
        // The first of two sets of one name is the one devices consume from.
        known_sets
            .entry(set.name.as_str())
            .or_insert(KnownSet { set, valid });
    }

    let whole_devices: BTreeSet<&str> = content
        .devices
        .iter()
        .filter(|device| device.partition_of.is_none())
        .map(|device| device.name.as_str())
        .collect();
    let mut device_valid = vec![true; content.devices.len()];
    let mut names = BTreeSet::new();
    for (index, device) in content.devices.iter().enumerate() {
        let mut report = |field: String, message: String| {
            problems.push(DeviceProblem::of_device(&device.name, field, message));
            device_valid[index] = false;
        };
        if let Some(problem) = dns_label_problem(&device.name) {
            report("name".to_owned(), format!("not a DNS label: {problem}"));
        }
        if !names.insert(device.name.as_str()) {
            report(
                "name".to_owned(),
                "another device has the same name".to_owned(),
            );
        }
        check_attributes(driver, device, &mut report);
        check_capacities(driver, device, &mut report);
        check_taints(device, version, &mut report);
        check_consumptions(device, &known_sets, version, &mut report);
        if let Some(whole) = &device.partition_of
            && !whole_devices.contains(whole.as_str())
        {
            report(
                "partitionOf".to_owned(),
                format!("the pool has no whole device named {whole:?}"),
            );
        }
    }

    let keep = |valid: &[bool], index: usize| valid[index];
    let mut kept = PoolContent {
        devices: content
            .devices
            .iter()
            .enumerate()
            .filter(|(index, _)| keep(&device_valid, *index))
            .map(|(_, device)| device.clone())
            .collect(),
        counter_sets: content
            .counter_sets
            .iter()
            .enumerate()
            .filter(|(index, _)| keep(&set_valid, *index))
            .map(|(_, set)| set.clone())
            .collect(),
    };
    if !version.separates_counter_sets() {
        problems.extend(check_fit(&mut kept, version));
    }
    PoolCheck {
        problems,
        content: kept,
    }
}

fn check_attributes(driver: &str, device: &DraDevice, report: &mut impl FnMut(String, String)) {
    let (attributes, capacities) = (device.attributes.len(), device.capacity.len());
    if attributes + capacities > MAX_ATTRIBUTES_PER_DEVICE {
        // The server names the device: the total of attributes and capacities.
        let counted = if capacities == 0 {
            format!("{attributes} attributes")
        } else {
            format!("{attributes} attributes and {capacities} capacities")
        };
        report(
            "attributes".to_owned(),
            format!("{counted}, more than the {MAX_ATTRIBUTES_PER_DEVICE} allowed together"),
        );
    }
    let mut qualified_keys = BTreeSet::new();
    for (key, value) in &device.attributes {
        let field = format!("attributes[{key:?}]");
        if let Some(problem) = attribute_key_problem(key) {
            report(field.clone(), problem);
        }
        let qualified = qualified_attribute_key(driver, key);
        if !qualified_keys.insert(qualified.clone()) {
            report(
                field.clone(),
                format!("another attribute is also written as {qualified:?}"),
            );
        }
        match value {
            AttributeValue::Int(_) | AttributeValue::Bool(_) => {}
            AttributeValue::String(text) => {
                if let Some(problem) = value_length_problem(text) {
                    report(format!("{field}.string"), problem);
                }
            }
            AttributeValue::Version(version) => {
                if let Some(problem) = value_length_problem(version) {
                    report(format!("{field}.version"), problem);
                } else if let Some(problem) = semver_problem(version) {
                    report(
                        format!("{field}.version"),
                        format!(
                            "{version:?} is not a semantic version (semver.org 2.0.0): {problem}"
                        ),
                    );
                }
            }
        }
    }
}

fn check_taints(
    device: &DraDevice,
    version: ServerVersion,
    report: &mut impl FnMut(String, String),
) {
    let limits = version.limits();
    let max = limits.max_taints_per_device;
    if device.taints.len() > max {
        report(
            "taints".to_owned(),
            format!(
                "{} taints, more than the {max} allowed",
                device.taints.len()
            ),
        );
    }
    for (index, taint) in device.taints.iter().enumerate() {
        if let Some(problem) = label_name_problem(&taint.key) {
            report(
                format!("taints[{index}].key"),
                format!("{:?} is not a label name: {problem}", taint.key),
            );
        }
        if let Some(problem) = label_value_problem(&taint.value) {
            report(
                format!("taints[{index}].value"),
                format!("{:?} is not a label value: {problem}", taint.value),
            );
        }
        if taint.effect == TaintEffect::None && !limits.taint_effect_none {
            report(
                format!("taints[{index}].effect"),
                format!(
                    "the effect None needs Kubernetes 1.35 or later; the API server is {version}"
                ),
            );
        }
    }
}

/// `content` without the taints whose effect a server of `version` does
/// not know (`None` before 1.35). The DRA driver leaves them out itself,
/// with a warning, once it knows the server's version; this keeps a pass
/// made before that from leaving their devices out.
pub(crate) fn without_unknown_effects(
    content: &PoolContent,
    version: ServerVersion,
) -> PoolContent {
    let mut content = content.clone();
    if !version.limits().taint_effect_none {
        for device in &mut content.devices {
            device
                .taints
                .retain(|taint| taint.effect != TaintEffect::None);
        }
    }
    content
}

/// The API server counts bytes, so a non-ASCII character counts more than once.
fn value_length_problem(value: &str) -> Option<String> {
    let length = value.len();
    (length > MAX_ATTRIBUTE_VALUE_LEN)
        .then(|| format!("{length} bytes, more than the {MAX_ATTRIBUTE_VALUE_LEN} allowed"))
}

/// Why `version` is not a semver 2.0.0 version, or `None`.
fn semver_problem(version: &str) -> Option<String> {
    let (rest, build) = match version.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (version, None),
    };
    let (core, pre_release) = match rest.split_once('-') {
        Some((core, pre_release)) => (core, Some(pre_release)),
        None => (rest, None),
    };
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() != 3 {
        return Some("the core must be MAJOR.MINOR.PATCH".to_owned());
    }
    for number in numbers {
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Some(format!("{number:?} is not a number"));
        }
        if number.len() > 1 && number.starts_with('0') {
            return Some(format!("{number:?} has a leading zero"));
        }
    }
    let identifier_ok = |identifier: &str| {
        !identifier.is_empty()
            && identifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if let Some(pre_release) = pre_release {
        for identifier in pre_release.split('.') {
            if !identifier_ok(identifier) {
                return Some(format!(
                    "pre-release identifier {identifier:?} is empty or has a character other than [0-9A-Za-z-]"
                ));
            }
            let numeric = identifier.bytes().all(|b| b.is_ascii_digit());
            if numeric && identifier.len() > 1 && identifier.starts_with('0') {
                return Some(format!(
                    "pre-release number {identifier:?} has a leading zero"
                ));
            }
        }
    }
    if let Some(build) = build
        && let Some(identifier) = build
            .split('.')
            .find(|identifier| !identifier_ok(identifier))
    {
        return Some(format!(
            "build identifier {identifier:?} is empty or has a character other than [0-9A-Za-z-]"
        ));
    }
    None
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
