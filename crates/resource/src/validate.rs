//! Checks every guest answer must pass before the kubelet sees it. Each
//! returns a sentence saying what is wrong; the caller names the guest and
//! hook.

use std::collections::{BTreeMap, BTreeSet};

use wdp_policy::types::{Device, Verdict};

use crate::device_set::{CandidateLookup, REPLICA_SEPARATOR, advertised_count};
use crate::grant::ContainerGrant;
use wdp_config::limits::MAX_DEVICE_ID_LEN;
use wdp_config::limits::{KUBELET_MAX_MESSAGE_BYTES, MAX_DEVICES_PER_RESOURCE};

/// Checks discovery's devices before anything is built from them: at most
/// [`MAX_DEVICES_PER_RESOURCE`] IDs once replicas are expanded; IDs unique,
/// non-empty, at most 63 characters with their replica suffix and made of
/// kubelet-safe characters; candidates the resource selected.
pub(crate) fn devices(devices: &[Device], candidates: &impl CandidateLookup) -> Result<(), String> {
    let count = advertised_count(devices);
    if count > MAX_DEVICES_PER_RESOURCE {
        return Err(format!(
            "{} devices with their replicas make {count} device IDs; at most {MAX_DEVICES_PER_RESOURCE} fit the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte message",
            devices.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for device in devices {
        if device.id.is_empty() {
            return Err("a device has an empty ID".to_owned());
        }
        let longest = if device.replicas <= 1 {
            device.id.len()
        } else {
            device.id.len() + REPLICA_SEPARATOR.len() + (device.replicas - 1).to_string().len()
        };
        if longest > MAX_DEVICE_ID_LEN {
            return Err(format!(
                "device ID {:?} is {longest} characters with its replica suffix; the kubelet allows {MAX_DEVICE_ID_LEN}",
                device.id
            ));
        }
        if device.id.contains(REPLICA_SEPARATOR)
            || !device
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
        {
            return Err(format!(
                "device ID {:?} may only hold letters, digits, '-', '_', '.' and single ':'",
                device.id
            ));
        }
        if !seen.insert(device.id.as_str()) {
            return Err(format!("device ID {:?} appears twice", device.id));
        }
        if let Some(bad) = device.numa_nodes.iter().find(|n| **n < 0) {
            return Err(format!("device {:?} names NUMA node {bad}", device.id));
        }
        if let Some(unknown) = device
            .candidates
            .iter()
            .find(|c| candidates.candidate(c).is_none())
        {
            return Err(format!(
                "device {:?} names candidate {unknown:?}, which the resource did not select",
                device.id
            ));
        }
    }
    Ok(())
}

/// Verdicts must name devices of the input, each at most once.
pub(crate) fn verdicts(list: &[Verdict], known: &BTreeMap<String, Verdict>) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for v in list {
        if !known.contains_key(&v.id) {
            return Err(format!("verdict for unknown device {:?}", v.id));
        }
        if !seen.insert(v.id.as_str()) {
            return Err(format!("two verdicts for device {:?}", v.id));
        }
    }
    Ok(())
}

/// A preferred allocation, as positions in the device set: exactly `size`
/// distinct positions, each offered (`available[p]`), containing every
/// must-include position. `id_of` names a position in the error. Costs the
/// answer's length, not the set's or the request's: no ID is compared.
pub fn preferred(
    answer: &[u32],
    available: &[bool],
    must_include: &[u32],
    size: usize,
    id_of: impl Fn(u32) -> String,
) -> Result<(), String> {
    if answer.len() != size {
        return Err(format!(
            "answered {} IDs, {size} were asked for",
            answer.len()
        ));
    }
    if let Some(&p) = answer
        .iter()
        .find(|&&p| !available.get(p as usize).copied().unwrap_or(false))
    {
        return Err(if (p as usize) < available.len() {
            format!("answered {:?}, which is not available", id_of(p))
        } else {
            format!(
                "answered position {p}, outside the {} devices",
                available.len()
            )
        });
    }
    let mut sorted = answer.to_vec();
    sorted.sort_unstable();
    if let Some(twice) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("answered {:?} twice", id_of(twice[0])));
    }
    if let Some(&missing) = must_include
        .iter()
        .find(|m| sorted.binary_search(m).is_err())
    {
        return Err(format!("left out must-include device {:?}", id_of(missing)));
    }
    Ok(())
}

/// A container grant's encoded size ([`ContainerGrant::encoded_len`]) must
/// fit the kubelet's limit.
pub(crate) fn message_size(response: &ContainerGrant) -> Result<(), String> {
    let size = response.encoded_len();
    if size > KUBELET_MAX_MESSAGE_BYTES {
        return Err(format!(
            "the answer is {size} bytes, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte message limit"
        ));
    }
    Ok(())
}

/// A container grant: its size ([`message_size`]), absolute paths,
/// permission strings, environment names, and CDI names of the form
/// `vendor/class=name`.
pub(crate) fn container_grant(response: &ContainerGrant) -> Result<(), String> {
    message_size(response)?;
    for spec in &response.devices {
        for path in [&spec.host_path, &spec.container_path] {
            if !path.starts_with('/') {
                return Err(format!("device spec path {path:?} is not absolute"));
            }
        }
        if spec.permissions.is_empty() || !spec.permissions.chars().all(|c| "rwm".contains(c)) {
            return Err(format!(
                "device spec {:?} has permissions {:?}; use r, w and m",
                spec.host_path, spec.permissions
            ));
        }
    }
    for mount in &response.mounts {
        for path in [&mount.host_path, &mount.container_path] {
            if !path.starts_with('/') {
                return Err(format!("mount path {path:?} is not absolute"));
            }
        }
    }
    for key in response.envs.keys() {
        if key.is_empty() || key.contains('=') || key.contains('\0') {
            return Err(format!("environment variable name {key:?} is not valid"));
        }
    }
    for cdi in &response.cdi_devices {
        let valid = cdi
            .split_once('=')
            .is_some_and(|(kind, name)| kind.contains('/') && !name.is_empty());
        if !valid {
            return Err(format!(
                "CDI device {cdi:?} is not a fully qualified name like vendor.com/class=name"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
