//! ResourceClaim status writes (the `status` subresource) as the real server admits them: device
//! statuses of devices that are no longer allocated are dropped, then the new status is
//! validated against the claim.
//!
//! - `status.devices`: each entry's (driver, pool, device, shareID) must be a result of
//!   `status.allocation.devices.results` (the real server checks this in
//!   `validateDeviceStatus`: "must be an allocated device in the claim"), and unique; at most
//!   8 conditions, each of a qualified-name type, a `True`/`False`/`Unknown` status and a reason
//!   of the condition-reason syntax, types unique; `data` a JSON object of at most 10 KiB;
//!   `networkData` with `interfaceName` ≤ 256 and `hardwareAddress` ≤ 128 bytes and at most 16
//!   unique `ips` in canonical CIDR form.
//! - `status.allocation`: immutable once set; when first set, at most 32 results, each naming
//!   a request of the claim and a valid driver, pool and device.
//! - `status.reservedFor`: at most 256 unique consumers, only with an allocation.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, NetworkDeviceData, ResourceClaim,
    ResourceClaimStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::device_id::{validate_device_name, validate_driver_name, validate_pool_name};
use super::field::{
    duplicate, forbidden, invalid, invalid_unquoted, not_supported, required, too_long, too_many,
};
use super::names::qualified_name_problem;
use super::quantity::{Quantity, QuantityError};
use crate::status::FieldError;

/// Conditions per device status.
const MAX_CONDITIONS: usize = 8;
/// Bytes of a device status's `data`.
const MAX_DATA: usize = 10 * 1024;
/// Bytes of `networkData.interfaceName`.
const MAX_INTERFACE_NAME: usize = 256;
/// Bytes of `networkData.hardwareAddress`.
const MAX_HARDWARE_ADDRESS: usize = 128;
/// Entries of `networkData.ips`.
const MAX_IPS: usize = 16;
/// Results of an allocation.
const MAX_RESULTS: usize = 32;
/// Entries of `reservedFor`.
const MAX_RESERVED_FOR: usize = 256;
/// Bytes of a condition reason.
const MAX_REASON: usize = 1024;
/// Bytes of a condition message.
const MAX_MESSAGE: usize = 32 * 1024;
/// The condition statuses the server accepts.
const CONDITION_STATUSES: &[&str] = &["False", "True", "Unknown"];
const REASON_FORMAT: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')";

/// `driver/pool/device[/shareID]`, as the real server prints a shared device ID.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct DeviceKey<'a> {
    driver: &'a str,
    pool: &'a str,
    device: &'a str,
    share_id: Option<&'a str>,
}

impl std::fmt::Display for DeviceKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.driver, self.pool, self.device)?;
        match self.share_id {
            Some(share) => write!(f, "/{share}"),
            None => Ok(()),
        }
    }
}

fn result_key(result: &DeviceRequestAllocationResult) -> DeviceKey<'_> {
    DeviceKey {
        driver: &result.driver,
        pool: &result.pool,
        device: &result.device,
        share_id: result.share_id.as_deref(),
    }
}

fn status_key(status: &AllocatedDeviceStatus) -> DeviceKey<'_> {
    DeviceKey {
        driver: &status.driver,
        pool: &status.pool,
        device: &status.device,
        share_id: status.share_id.as_deref(),
    }
}

fn results(status: Option<&ResourceClaimStatus>) -> &[DeviceRequestAllocationResult] {
    status
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default()
}

/// The first quantity of the claim's status that does not parse (the body is then refused
/// with 400 before any validation, as the real server cannot decode it).
pub(crate) fn claim_body_problem(claim: &ResourceClaim) -> Option<QuantityError> {
    results(claim.status.as_ref())
        .iter()
        .flat_map(|r| r.consumed_capacity.iter().flatten())
        .find_map(|(_, q)| Quantity::parse(&q.0).err())
}

/// Admits the status of `new` (whose spec and metadata are the stored `old`'s) over `old`.
pub(crate) fn admit_claim_status(
    new: &mut ResourceClaim,
    old: &ResourceClaim,
) -> Result<(), Vec<FieldError>> {
    drop_deallocated_devices(new, old);
    let mut errors = Vec::new();
    let empty = ResourceClaimStatus::default();
    let status = new.status.as_ref().unwrap_or(&empty);
    let old_status = old.status.as_ref().unwrap_or(&empty);
    validate_reserved_for(status, &mut errors);
    validate_allocation(new, status, old_status, &mut errors);
    validate_device_statuses(status, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Statuses of devices that the old allocation had and the new one does not are dropped.
fn drop_deallocated_devices(new: &mut ResourceClaim, old: &ResourceClaim) {
    let kept: BTreeSet<String> = results(new.status.as_ref())
        .iter()
        .map(|r| result_key(r).to_string())
        .collect();
    let deallocated: BTreeSet<String> = results(old.status.as_ref())
        .iter()
        .map(|r| result_key(r).to_string())
        .filter(|key| !kept.contains(key))
        .collect();
    if deallocated.is_empty() {
        return;
    }
    if let Some(status) = new.status.as_mut()
        && let Some(devices) = status.devices.as_mut()
    {
        devices.retain(|d| !deallocated.contains(&status_key(d).to_string()));
        if devices.is_empty() {
            status.devices = None;
        }
    }
}

fn validate_reserved_for(status: &ResourceClaimStatus, errors: &mut Vec<FieldError>) {
    const PATH: &str = "status.reservedFor";
    let reserved = status.reserved_for.as_deref().unwrap_or_default();
    if reserved.len() > MAX_RESERVED_FOR {
        errors.push(too_many(PATH, reserved.len(), MAX_RESERVED_FOR));
    } else {
        let mut uids = BTreeSet::new();
        for (i, consumer) in reserved.iter().enumerate() {
            let path = format!("{PATH}[{i}]");
            for (field, value) in [
                ("resource", &consumer.resource),
                ("name", &consumer.name),
                ("uid", &consumer.uid),
            ] {
                if value.is_empty() {
                    errors.push(required(format!("{path}.{field}"), ""));
                }
            }
            if !uids.insert(consumer.uid.as_str()) {
                errors.push(duplicate(path, &consumer.uid));
            }
        }
    }
    if !reserved.is_empty() && status.allocation.is_none() {
        errors.push(forbidden(
            PATH,
            "may not be specified when `allocated` is not set",
        ));
    }
}

fn validate_allocation(
    claim: &ResourceClaim,
    status: &ResourceClaimStatus,
    old: &ResourceClaimStatus,
    errors: &mut Vec<FieldError>,
) {
    const PATH: &str = "status.allocation";
    let Some(allocation) = &status.allocation else {
        return;
    };
    if let Some(before) = &old.allocation {
        if before != allocation {
            errors.push(invalid_unquoted(PATH, "{...}", "field is immutable"));
        }
        return;
    }
    let results = allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    let results_path = format!("{PATH}.devices.results");
    if results.len() > MAX_RESULTS {
        errors.push(too_many(results_path, results.len(), MAX_RESULTS));
        return;
    }
    let requests = request_names(claim);
    for (i, result) in results.iter().enumerate() {
        let path = format!("{results_path}[{i}]");
        if !is_request(&requests, &result.request) {
            errors.push(invalid(
                format!("{path}.request"),
                &result.request,
                "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'",
            ));
        }
        validate_driver_name(&result.driver, &format!("{path}.driver"), errors);
        validate_pool_name(&result.pool, &format!("{path}.pool"), errors);
        validate_device_name(&result.device, &format!("{path}.device"), errors);
        if let Some(share) = &result.share_id {
            validate_uid(share, &format!("{path}.shareID"), errors);
        }
    }
}

/// The claim's request names, each with its subrequest names (empty for `exactly` requests).
fn request_names(claim: &ResourceClaim) -> BTreeMap<&str, BTreeSet<&str>> {
    claim
        .spec
        .devices
        .iter()
        .flat_map(|d| d.requests.iter().flatten())
        .map(|r| {
            let subrequests = r
                .first_available
                .iter()
                .flatten()
                .map(|s| s.name.as_str())
                .collect();
            (r.name.as_str(), subrequests)
        })
        .collect()
}

fn is_request(requests: &BTreeMap<&str, BTreeSet<&str>>, reference: &str) -> bool {
    let mut parts = reference.split('/');
    let (Some(request), sub, None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    match (requests.get(request), sub) {
        (Some(_), None) => true,
        (Some(subrequests), Some(sub)) => subrequests.contains(sub),
        (None, _) => false,
    }
}

fn validate_device_statuses(status: &ResourceClaimStatus, errors: &mut Vec<FieldError>) {
    let allocated: BTreeSet<DeviceKey<'_>> = results(Some(status)).iter().map(result_key).collect();
    let mut seen = BTreeSet::new();
    for (i, device) in status.devices.iter().flatten().enumerate() {
        let path = format!("status.devices[{i}]");
        validate_driver_name(&device.driver, &format!("{path}.driver"), errors);
        validate_pool_name(&device.pool, &format!("{path}.pool"), errors);
        validate_device_name(&device.device, &format!("{path}.device"), errors);
        if let Some(share) = &device.share_id {
            validate_uid(share, &format!("{path}.shareID"), errors);
        }
        let key = status_key(device);
        if !allocated.contains(&key) {
            errors.push(invalid_unquoted(
                &path,
                &key,
                "must be an allocated device in the claim",
            ));
        }
        validate_conditions(
            device.conditions.as_deref().unwrap_or_default(),
            &path,
            errors,
        );
        if let Some(data) = &device.data {
            validate_data(&data.0, &format!("{path}.data"), errors);
        }
        if let Some(network) = &device.network_data {
            validate_network_data(network, &format!("{path}.networkData"), errors);
        }
        if !seen.insert(key.clone()) {
            errors.push(duplicate(path, key.to_string()));
        }
    }
}

/// An RFC 4122 UUID in its lowercase normalized form.
fn validate_uid(uid: &str, path: &str, errors: &mut Vec<FieldError>) {
    let groups: Vec<&str> = uid.split('-').collect();
    let shaped = groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|c| c.is_ascii_hexdigit()));
    if !shaped {
        errors.push(invalid(
            path,
            uid,
            "error validating uid: invalid UUID format",
        ));
    } else if uid != uid.to_ascii_lowercase() {
        errors.push(invalid(
            path,
            uid,
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters",
        ));
    }
}

fn validate_conditions(conditions: &[Condition], path: &str, errors: &mut Vec<FieldError>) {
    let path = format!("{path}.conditions");
    if conditions.len() > MAX_CONDITIONS {
        errors.push(too_many(&path, conditions.len(), MAX_CONDITIONS));
    }
    let mut types = BTreeSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !types.insert(condition.type_.as_str()) {
            errors.push(duplicate(format!("{at}.type"), &condition.type_));
        }
        if let Some(detail) = qualified_name_problem(&condition.type_) {
            errors.push(invalid(format!("{at}.type"), &condition.type_, detail));
        }
        if !CONDITION_STATUSES.contains(&condition.status.as_str()) {
            errors.push(not_supported(
                format!("{at}.status"),
                &condition.status,
                CONDITION_STATUSES,
            ));
        }
        if condition.observed_generation.is_some_and(|g| g < 0) {
            errors.push(invalid_unquoted(
                format!("{at}.observedGeneration"),
                condition.observed_generation.unwrap_or_default(),
                "must be greater than or equal to zero",
            ));
        }
        let reason = &condition.reason;
        if reason.is_empty() {
            errors.push(required(format!("{at}.reason"), "must be set"));
        } else {
            if !is_condition_reason(reason) {
                errors.push(invalid(format!("{at}.reason"), reason, REASON_FORMAT));
            }
            if reason.len() > MAX_REASON {
                errors.push(too_long(format!("{at}.reason"), MAX_REASON));
            }
        }
        if condition.message.len() > MAX_MESSAGE {
            errors.push(too_long(format!("{at}.message"), MAX_MESSAGE));
        }
    }
}

/// `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`.
fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |c: &u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':');
    bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.iter().all(inner)
        && bytes
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

fn validate_data(data: &serde_json::Value, path: &str, errors: &mut Vec<FieldError>) {
    let length = serde_json::to_vec(data).map_or(0, |raw| raw.len());
    if data.is_null() {
        errors.push(required(path, ""));
    } else if length > MAX_DATA {
        errors.push(too_long(path, MAX_DATA));
    } else if !data.is_object() {
        errors.push(invalid(
            path,
            "<value omitted>",
            "must be a valid JSON object",
        ));
    }
}

fn validate_network_data(network: &NetworkDeviceData, path: &str, errors: &mut Vec<FieldError>) {
    if network
        .interface_name
        .as_ref()
        .is_some_and(|n| n.len() > MAX_INTERFACE_NAME)
    {
        errors.push(too_long(
            format!("{path}.interfaceName"),
            MAX_INTERFACE_NAME,
        ));
    }
    if network
        .hardware_address
        .as_ref()
        .is_some_and(|a| a.len() > MAX_HARDWARE_ADDRESS)
    {
        errors.push(too_long(
            format!("{path}.hardwareAddress"),
            MAX_HARDWARE_ADDRESS,
        ));
    }
    let ips = network.ips.as_deref().unwrap_or_default();
    let ips_path = format!("{path}.ips");
    if ips.len() > MAX_IPS {
        errors.push(too_many(ips_path, ips.len(), MAX_IPS));
        return;
    }
    let mut seen = BTreeSet::new();
    for (i, ip) in ips.iter().enumerate() {
        let at = format!("{ips_path}[{i}]");
        if let Some(detail) = interface_address_problem(ip) {
            errors.push(invalid(&at, ip, detail));
        }
        if !seen.insert(ip.as_str()) {
            errors.push(duplicate(at, ip));
        }
    }
}

/// An interface address in CIDR form (`10.9.8.7/24`, `2001:db8::1/64`), in canonical form.
fn interface_address_problem(value: &str) -> Option<String> {
    const FORMAT: &str =
        "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)";
    let Some((address, prefix)) = value.split_once('/') else {
        return Some(FORMAT.into());
    };
    let Ok(ip) = address.parse::<IpAddr>() else {
        return Some(FORMAT.into());
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let prefix_ok = !prefix.is_empty()
        && prefix.bytes().all(|c| c.is_ascii_digit())
        && prefix.parse::<u8>().is_ok_and(|p| p <= max);
    if !prefix_ok {
        return Some(FORMAT.into());
    }
    let canonical = format!("{ip}/{}", prefix.parse::<u8>().unwrap_or_default());
    (canonical != value).then(|| format!("must be in canonical form ({canonical:?})"))
}

#[cfg(test)]
#[path = "claim_status_tests.rs"]
mod tests;
