//! Everything the API server would reject in a device list, found before it is sent.
//!
//! The rules are those of `resource.k8s.io/v1` validation: device names are
//! unique DNS labels; a device has at most 32 attributes, each keyed
//! `[domain/]identifier` (a C identifier of at most 32 characters, a domain
//! that is a DNS subdomain of at most 63), holding a string or version of at
//! most 64 characters, a version being semver 2.0.0; at most 16 taints, keyed
//! by a label name, valued by a label value. `check` prints these problems;
//! the publisher sends what it is given, so a problem missed here comes back
//! as the API server's own rejection in the publisher's status.

use std::collections::BTreeSet;
use std::fmt;

use crate::device::{AttributeValue, DraDevice};
use crate::naming::{check_driver_name, dns_label_problem, dns_subdomain_problem};
use crate::plan::qualified_attribute_key;

/// At most this many attributes (and capacities) per device.
pub const MAX_ATTRIBUTES_PER_DEVICE: usize = 32;
/// At most this many taints per device.
pub const MAX_TAINTS_PER_DEVICE: usize = 16;
/// The longest string or version attribute value, in bytes.
pub const MAX_ATTRIBUTE_VALUE_LEN: usize = 64;
/// The longest attribute identifier (the part after the domain).
pub const MAX_ATTRIBUTE_ID_LEN: usize = 32;

/// One thing the API server would reject, naming the device and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProblem {
    /// The device's name; `None` for a problem of the driver itself.
    pub device: Option<String>,
    /// The field, in the API's path form (`attributes["gpu.example.com/model"]`, `taints[0].key`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DeviceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.device {
            Some(device) => write!(f, "device {device:?}: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}

/// Checks `devices` of `driver` against the API server's rules; empty when all is well.
pub fn validate(driver: &str, devices: &[DraDevice]) -> Vec<DeviceProblem> {
    let mut problems = Vec::new();
    if let Err(error) = check_driver_name(driver) {
        problems.push(DeviceProblem {
            device: None,
            field: "driver".to_owned(),
            message: error.to_string(),
        });
    }
    let mut names = BTreeSet::new();
    for device in devices {
        let mut report = |field: String, message: String| {
            problems.push(DeviceProblem {
                device: Some(device.name.clone()),
                field,
                message,
            })
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
        check_taints(device, &mut report);
    }
    problems
}

fn check_attributes(driver: &str, device: &DraDevice, report: &mut impl FnMut(String, String)) {
    if device.attributes.len() > MAX_ATTRIBUTES_PER_DEVICE {
        report(
            "attributes".to_owned(),
            format!(
                "{} attributes, more than the {MAX_ATTRIBUTES_PER_DEVICE} allowed",
                device.attributes.len()
            ),
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

fn check_taints(device: &DraDevice, report: &mut impl FnMut(String, String)) {
    if device.taints.len() > MAX_TAINTS_PER_DEVICE {
        report(
            "taints".to_owned(),
            format!(
                "{} taints, more than the {MAX_TAINTS_PER_DEVICE} allowed",
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
        if !taint.value.is_empty()
            && let Some(problem) = label_name_part_problem(&taint.value)
        {
            report(
                format!("taints[{index}].value"),
                format!("{:?} is not a label value: {problem}", taint.value),
            );
        }
        // The effect is a `TaintEffect`, so it is always NoSchedule or NoExecute.
    }
}

/// The API server counts bytes, so a non-ASCII character counts more than once.
fn value_length_problem(value: &str) -> Option<String> {
    let length = value.len();
    (length > MAX_ATTRIBUTE_VALUE_LEN)
        .then(|| format!("{length} bytes, more than the {MAX_ATTRIBUTE_VALUE_LEN} allowed"))
}

/// Why `key` is not `[domain/]identifier`, or `None`.
fn attribute_key_problem(key: &str) -> Option<String> {
    let (domain, identifier) = match key.split_once('/') {
        Some((domain, identifier)) => (Some(domain), identifier),
        None => (None, key),
    };
    if let Some(domain) = domain {
        if domain.len() > 63 {
            return Some(format!(
                "the domain {domain:?} is longer than 63 characters"
            ));
        }
        if let Some(problem) = dns_subdomain_problem(domain) {
            return Some(format!(
                "the domain {domain:?} is not a DNS subdomain: {problem}"
            ));
        }
    }
    if identifier.contains('/') {
        return Some("more than one '/': the key must be [domain/]identifier".to_owned());
    }
    c_identifier_problem(identifier)
}

fn c_identifier_problem(identifier: &str) -> Option<String> {
    let mut characters = identifier.chars();
    let Some(first) = characters.next() else {
        return Some("the identifier is empty".to_owned());
    };
    if identifier.len() > MAX_ATTRIBUTE_ID_LEN {
        return Some(format!(
            "the identifier {identifier:?} is longer than {MAX_ATTRIBUTE_ID_LEN} characters"
        ));
    }
    let valid_rest = characters.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !(first.is_ascii_alphabetic() || first == '_') || !valid_rest {
        return Some(format!(
            "the identifier {identifier:?} is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    None
}

/// Why `key` is not a label name (`[prefix/]name`), or `None`.
fn label_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(problem) = dns_subdomain_problem(prefix)
    {
        return Some(format!(
            "the prefix {prefix:?} is not a DNS subdomain: {problem}"
        ));
    }
    if name.is_empty() {
        return Some("the name part is empty".to_owned());
    }
    label_name_part_problem(name)
}

/// Why `part` is not the name part of a label key, nor a label value, or `None`:
/// at most 63 characters, alphanumerics with `-`, `_`, `.` between them.
fn label_name_part_problem(part: &str) -> Option<String> {
    if part.len() > 63 {
        return Some(format!("{} characters, more than 63", part.len()));
    }
    let alphanumeric_at = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    let valid_characters = part
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !valid_characters
        || !alphanumeric_at(part.chars().next())
        || !alphanumeric_at(part.chars().last())
    {
        return Some(
            "only letters, digits, '-', '_' and '.' are allowed, starting and ending with a letter or digit"
                .to_owned(),
        );
    }
    None
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
