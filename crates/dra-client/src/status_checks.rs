//! What the API server would reject in the device status entries a driver
//! writes on a ResourceClaim (KEP-4817), found before they are sent.
//!
//! Each entry must name this driver and pool and a device (with its
//! `shareID`, if any) that the claim's allocation holds, at most once. It may
//! carry at most 8 conditions of distinct types, each typed by a qualified
//! name of at most 316 characters, with a status of `True`, `False` or
//! `Unknown`, a reason (`[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`, at most
//! 1024 characters), a message of at most 32768 and a non-negative observed
//! generation; `data` must be a JSON object of at most 10 KiB; `networkData`
//! an interface name of at most 256 bytes, a hardware address of at most 128
//! and at most 16 distinct IP addresses with prefix length in canonical form
//! (`10.9.8.7/24`, `2001:db8::1/64`).

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, NetworkDeviceData, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use wdp_k8s_naming::label_name_problem;

/// At most this many conditions per device status entry.
pub const MAX_DEVICE_STATUS_CONDITIONS: usize = 8;
/// The largest `data` of a device status entry, in bytes of JSON.
pub const MAX_DEVICE_STATUS_DATA_LEN: usize = 10 * 1024;
/// The longest `networkData.interfaceName`, in bytes.
pub const MAX_INTERFACE_NAME_LEN: usize = 256;
/// The longest `networkData.hardwareAddress`, in bytes.
pub const MAX_HARDWARE_ADDRESS_LEN: usize = 128;
/// At most this many `networkData.ips`.
pub const MAX_NETWORK_IPS: usize = 16;

const MAX_CONDITION_TYPE_LEN: usize = 316;
const MAX_CONDITION_REASON_LEN: usize = 1024;
const MAX_CONDITION_MESSAGE_LEN: usize = 32 * 1024;

/// One thing wrong with a device status entry, naming the device and field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusProblem {
    /// The entry's device.
    pub device: String,
    /// The entry's `shareID`, if any.
    pub share_id: Option<String>,
    /// The field within the entry (`conditions[0].reason`, `networkData.ips[1]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for StatusProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {:?}", self.device)?;
        if let Some(share) = &self.share_id {
            write!(f, " (share {share})")?;
        }
        write!(f, ": {}: {}", self.field, self.message)
    }
}

/// Checks `statuses` of `driver`'s `pool` against `claim`; empty when all is well.
pub(crate) fn check_statuses(
    claim: &ResourceClaim,
    driver: &str,
    pool: &str,
    statuses: &[AllocatedDeviceStatus],
) -> Vec<StatusProblem> {
    let allocated: BTreeSet<(&str, &str, &str, Option<&str>)> = claim
        .status
        .iter()
        .flat_map(|status| status.allocation.iter())
        .flat_map(|allocation| allocation.devices.iter())
        .flat_map(|devices| devices.results.iter().flatten())
        .map(|result| {
            (
                result.driver.as_str(),
                result.pool.as_str(),
                result.device.as_str(),
                result.share_id.as_deref(),
            )
        })
        .collect();
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in statuses {
        let mut report = |field: &str, message: String| {
            problems.push(StatusProblem {
                device: entry.device.clone(),
                share_id: entry.share_id.clone(),
                field: field.to_owned(),
                message,
            })
        };
        if entry.driver != driver {
            report(
                "driver",
                format!("{:?} is not the driver writing ({driver:?})", entry.driver),
            );
        }
        if entry.pool != pool {
            report(
                "pool",
                format!("{:?} is not the pool written ({pool:?})", entry.pool),
            );
        }
        let key = (
            entry.driver.as_str(),
            entry.pool.as_str(),
            entry.device.as_str(),
            entry.share_id.as_deref(),
        );
        if !allocated.contains(&key) {
            report(
                "device",
                "the claim's allocation has no such device (driver, pool, device and shareID)"
                    .to_owned(),
            );
        }
        if !seen.insert(key) {
            report("device", "another entry is for the same device".to_owned());
        }
        check_conditions(entry.conditions.as_deref().unwrap_or_default(), &mut report);
        if let Some(data) = &entry.data {
            check_data(&data.0, &mut report);
        }
        if let Some(network) = &entry.network_data {
            check_network(network, &mut report);
        }
    }
    problems
}

fn check_conditions(conditions: &[Condition], report: &mut impl FnMut(&str, String)) {
    if conditions.len() > MAX_DEVICE_STATUS_CONDITIONS {
        report(
            "conditions",
            format!(
                "{} conditions, more than the {MAX_DEVICE_STATUS_CONDITIONS} allowed",
                conditions.len()
            ),
        );
    }
    let mut types = BTreeSet::new();
    for (index, condition) in conditions.iter().enumerate() {
        let field = |name: &str| format!("conditions[{index}].{name}");
        if condition.type_.len() > MAX_CONDITION_TYPE_LEN {
            report(
                &field("type"),
                format!("longer than {MAX_CONDITION_TYPE_LEN} characters"),
            );
        } else if let Some(problem) = label_name_problem(&condition.type_) {
            report(
                &field("type"),
                format!("{:?} is not a qualified name: {problem}", condition.type_),
            );
        }
        if !types.insert(condition.type_.as_str()) {
            report(
                &field("type"),
                format!("another condition has type {:?}", condition.type_),
            );
        }
        if !matches!(condition.status.as_str(), "True" | "False" | "Unknown") {
            report(
                &field("status"),
                format!(
                    "{:?} is not one of \"True\", \"False\", \"Unknown\"",
                    condition.status
                ),
            );
        }
        if let Some(problem) = reason_problem(&condition.reason) {
            report(&field("reason"), problem);
        }
        if condition.message.len() > MAX_CONDITION_MESSAGE_LEN {
            report(
                &field("message"),
                format!("longer than {MAX_CONDITION_MESSAGE_LEN} bytes"),
            );
        }
        if condition.observed_generation.is_some_and(|g| g < 0) {
            report(&field("observedGeneration"), "is negative".to_owned());
        }
    }
}

/// Why `reason` is not a condition reason, or `None`.
fn reason_problem(reason: &str) -> Option<String> {
    if reason.is_empty() {
        return Some("required".to_owned());
    }
    if reason.len() > MAX_CONDITION_REASON_LEN {
        return Some(format!("longer than {MAX_CONDITION_REASON_LEN} characters"));
    }
    let bytes = reason.as_bytes();
    let first_ok = bytes[0].is_ascii_alphabetic();
    let middle_ok = bytes
        .iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'));
    let last = bytes[bytes.len() - 1];
    let last_ok = last.is_ascii_alphanumeric() || last == b'_';
    (!(first_ok && middle_ok && last_ok)).then(|| {
        format!(
            "{reason:?} must start with a letter, hold only letters, digits, '_', ',' and ':', and end with a letter, digit or '_'"
        )
    })
}

fn check_data(data: &serde_json::Value, report: &mut impl FnMut(&str, String)) {
    if !data.is_object() {
        report("data", "must be a JSON object".to_owned());
        return;
    }
    let length = serde_json::to_vec(data).map_or(usize::MAX, |bytes| bytes.len());
    if length > MAX_DEVICE_STATUS_DATA_LEN {
        report(
            "data",
            format!("{length} bytes of JSON, more than the {MAX_DEVICE_STATUS_DATA_LEN} allowed"),
        );
    }
}

fn check_network(network: &NetworkDeviceData, report: &mut impl FnMut(&str, String)) {
    if let Some(name) = &network.interface_name
        && name.len() > MAX_INTERFACE_NAME_LEN
    {
        report(
            "networkData.interfaceName",
            format!(
                "{} bytes, more than the {MAX_INTERFACE_NAME_LEN} allowed",
                name.len()
            ),
        );
    }
    if let Some(address) = &network.hardware_address
        && address.len() > MAX_HARDWARE_ADDRESS_LEN
    {
        report(
            "networkData.hardwareAddress",
            format!(
                "{} bytes, more than the {MAX_HARDWARE_ADDRESS_LEN} allowed",
                address.len()
            ),
        );
    }
    let ips = network.ips.as_deref().unwrap_or_default();
    if ips.len() > MAX_NETWORK_IPS {
        report(
            "networkData.ips",
            format!(
                "{} addresses, more than the {MAX_NETWORK_IPS} allowed",
                ips.len()
            ),
        );
        return;
    }
    let mut seen = BTreeSet::new();
    for (index, ip) in ips.iter().enumerate() {
        let field = format!("networkData.ips[{index}]");
        if let Some(problem) = interface_address_problem(ip) {
            report(&field, problem);
        }
        if !seen.insert(ip.as_str()) {
            report(&field, format!("{ip} is listed twice"));
        }
    }
}

/// Why `text` is not an IP address with a prefix length in canonical form
/// (`10.9.8.7/24`, `2001:db8::1/64`), or `None`.
fn interface_address_problem(text: &str) -> Option<String> {
    let invalid = || {
        Some(format!(
            "{text:?} is not an address in CIDR form (10.9.8.7/24 or 2001:db8::1/64)"
        ))
    };
    let Some((address, prefix)) = text.split_once('/') else {
        return invalid();
    };
    let Ok(ip) = address.parse::<IpAddr>() else {
        return invalid();
    };
    let max_prefix = if ip.is_ipv4() { 32 } else { 128 };
    let Some(length) = prefix
        .parse::<u8>()
        .ok()
        .filter(|&length| length <= max_prefix && prefix.bytes().all(|b| b.is_ascii_digit()))
    else {
        return invalid();
    };
    let canonical = match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("{v4}/{}", length.saturating_sub(96)),
            None => format!("{v6}/{length}"),
        },
        IpAddr::V4(v4) => format!("{v4}/{length}"),
    };
    (canonical != text).then(|| format!("{text:?} is not in canonical form ({canonical:?})"))
}

#[cfg(test)]
#[path = "status_checks_tests.rs"]
mod tests;
