//! The DRA prepare actions of a resource (WIT 0.1.2): the `dra-prepare`
//! guest creates what a claim's devices need and reports their status,
//! the `dra-unprepare` guest removes it. Without the hooks there is
//! nothing to create and no status to report.
//!
//! Unlike the other hooks, a failure here never falls back to the
//! built-in policy, whatever `on-error` says: a partition that was not
//! created must not be handed to a container as if it had been. The
//! statuses a guest answers are checked against the API's limits
//! ([`check_statuses`]) before anything is written.

use std::collections::BTreeSet;

use wdp_policy::Hook;
use wdp_policy::types::{ClaimDevice, DeviceCondition, DeviceStatus, NetworkData};

use crate::admission_error::AdmissionError;
use crate::resource::Resource;

/// The most conditions one device status may carry.
pub(crate) const MAX_CONDITIONS: usize = 8;
/// The largest `data` of one device status, in bytes.
pub(crate) const MAX_STATUS_DATA: usize = 10 * 1024;
/// The most IPs of one device's network data.
const MAX_IPS: usize = 16;

impl Resource {
    /// Runs the `dra-prepare` guest for a claim's `devices` (inside
    /// `guest_call::with_claim`); its statuses, or none without the hook.
    pub async fn dra_prepare(
        &self,
        devices: &[ClaimDevice],
    ) -> Result<Vec<DeviceStatus>, AdmissionError> {
        let spec = self.spec();
        let Some((binding, guest)) = spec.bound(Hook::DraPrepare) else {
            return Ok(Vec::new());
        };
        let input = devices.to_vec();
        let ids: Vec<String> = devices.iter().map(|d| d.id.clone()).collect();
        self.caller
            .call(
                &spec,
                binding,
                guest,
                self.present_candidates(),
                move |g, ctx| g.dra_prepare(ctx, &input),
                move |answer| check_statuses(answer, &ids),
            )
            .await
            .map_err(|failure| AdmissionError::DraAction {
                hook: Hook::DraPrepare,
                failure,
            })
    }

    /// Runs the `dra-unprepare` guest for a claim's `devices`; `Ok` without
    /// the hook.
    pub async fn dra_unprepare(&self, devices: &[ClaimDevice]) -> Result<(), AdmissionError> {
        let spec = self.spec();
        let Some((binding, guest)) = spec.bound(Hook::DraUnprepare) else {
            return Ok(());
        };
        let input = devices.to_vec();
        self.caller
            .call(
                &spec,
                binding,
                guest,
                self.present_candidates(),
                move |g, ctx| g.dra_unprepare(ctx, &input),
                |()| Ok(()),
            )
            .await
            .map_err(|failure| AdmissionError::DraAction {
                hook: Hook::DraUnprepare,
                failure,
            })
    }
}

/// Checks a `dra-prepare` answer: each status names a device of the call
/// once, with at most [`MAX_CONDITIONS`] conditions (type set, status
/// `True`/`False`/`Unknown`, reason one CamelCase word), `data` a JSON
/// object of at most [`MAX_STATUS_DATA`] bytes, and network data within
/// the API's lengths with IPs in CIDR notation.
pub(crate) fn check_statuses(statuses: &[DeviceStatus], ids: &[String]) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for status in statuses {
        let what = format!("status of device {:?}", status.id);
        if !ids.contains(&status.id) {
            return Err(format!("{what}: not a device of the claim"));
        }
        if !seen.insert(status.id.as_str()) {
            return Err(format!("{what}: answered twice"));
        }
        check_conditions(&status.conditions, &what)?;
        if let Some(data) = &status.data {
            if data.len() > MAX_STATUS_DATA {
                return Err(format!(
                    "{what}: data is {} bytes, more than {MAX_STATUS_DATA}",
                    data.len()
                ));
            }
            match serde_json::from_str::<serde_json::Value>(data) {
                Ok(serde_json::Value::Object(_)) => {}
                Ok(_) => return Err(format!("{what}: data must be a JSON object")),
                Err(error) => return Err(format!("{what}: data is not JSON: {error}")),
            }
        }
        if let Some(network) = &status.network {
            check_network(network, &what)?;
        }
    }
    Ok(())
}

/// One status's conditions (`what` names the status): at most
/// [`MAX_CONDITIONS`], each type once and a condition type, status
/// `True`/`False`/`Unknown`, reason one CamelCase word, message at most
/// 32 KiB.
fn check_conditions(conditions: &[DeviceCondition], what: &str) -> Result<(), String> {
    if conditions.len() > MAX_CONDITIONS {
        return Err(format!(
            "{what}: {} conditions, more than {MAX_CONDITIONS}",
            conditions.len()
        ));
    }
    let mut types = BTreeSet::new();
    for condition in conditions {
        let type_ok = !condition.type_.is_empty()
            && condition.type_.len() <= 316
            && condition
                .type_
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
        if !type_ok {
            return Err(format!(
                "{what}: condition type {:?} is not a condition type",
                condition.type_
            ));
        }
        if !types.insert(condition.type_.as_str()) {
            return Err(format!(
                "{what}: condition {:?} given twice",
                condition.type_
            ));
        }
        if !matches!(condition.status.as_str(), "True" | "False" | "Unknown") {
            return Err(format!(
                "{what}: condition {:?} has status {:?}; it must be True, False or Unknown",
                condition.type_, condition.status
            ));
        }
        let reason_ok = !condition.reason.is_empty()
            && condition.reason.len() <= 1024
            && condition
                .reason
                .starts_with(|c: char| c.is_ascii_alphabetic())
            && condition
                .reason
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':'));
        if !reason_ok {
            return Err(format!(
                "{what}: condition {:?} has reason {:?}; it must be one CamelCase word",
                condition.type_, condition.reason
            ));
        }
        if condition.message.len() > 32 * 1024 {
            return Err(format!(
                "{what}: condition {:?} has a message above 32 KiB",
                condition.type_
            ));
        }
    }
    Ok(())
}

/// One status's network data (`what` names the status): the API's
/// lengths, at most [`MAX_IPS`] IPs, each in CIDR notation and once.
fn check_network(network: &NetworkData, what: &str) -> Result<(), String> {
    if network.interface_name.len() > 256 {
        return Err(format!("{what}: interface name above 256 bytes"));
    }
    if network.hardware_address.len() > 128 {
        return Err(format!("{what}: hardware address above 128 bytes"));
    }
    if network.ips.len() > MAX_IPS {
        return Err(format!("{what}: more than {MAX_IPS} IPs"));
    }
    let mut ips = BTreeSet::new();
    for ip in &network.ips {
        if !is_cidr(ip) {
            return Err(format!(
                "{what}: IP {ip:?} is not an address in CIDR notation (e.g. 192.0.2.5/24)"
            ));
        }
        if !ips.insert(ip.as_str()) {
            return Err(format!("{what}: IP {ip:?} given twice"));
        }
    }
    Ok(())
}

/// `address/prefix`, the prefix within the address's length.
fn is_cidr(text: &str) -> bool {
    let Some((address, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(_)) => prefix <= 32,
        Ok(std::net::IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

#[cfg(test)]
#[path = "dra_actions_tests.rs"]
mod tests;
