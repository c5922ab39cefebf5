//! ResourceSlice admission as a 1.34+ API server does it: fields a disabled feature gate
//! drops, server-filled taint times, then validation of `spec` with every error named by its
//! field path (`spec.devices[3].name`, `spec.devices[0].attributes[example.com/model]`, …).

mod names;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceTaint, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::admission::AdmissionPolicy;
use crate::status::{FieldError, FieldErrorKind};
pub(crate) use names::dns_subdomain_problem;
use names::{
    c_identifier_problem, dns_label_problem, is_semver, label_value_problem, qualified_name_problem,
};

/// Devices per slice.
const MAX_DEVICES: usize = 128;
/// Devices per slice when any device has taints or consumes counters.
const MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// Attributes plus capacities per device.
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// Taints per device.
const MAX_TAINTS: usize = 16;
/// Counter consumptions per device.
const MAX_COUNTER_CONSUMPTIONS: usize = 2;
/// Counter sets per slice.
const MAX_COUNTER_SETS: usize = 8;
/// Length of attribute strings and versions.
const MAX_ATTRIBUTE_STRING: usize = 64;
/// The taint effects the server accepts.
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule"];

/// Runs admission on a slice being created (`old` is `None`) or updated.
pub(crate) fn admit_slice(
    slice: &mut ResourceSlice,
    old: Option<&ResourceSlice>,
    policy: &AdmissionPolicy,
) -> Result<(), Vec<FieldError>> {
    for device in slice.spec.devices.iter_mut().flatten() {
        if policy.taints_dropped {
            device.taints = None;
        }
        let old_device = old.and_then(|o| {
            o.spec
                .devices
                .iter()
                .flatten()
                .find(|d| d.name == device.name)
        });
        for taint in device.taints.iter_mut().flatten() {
            fill_time_added(taint, old_device, policy);
        }
    }
    let mut errors = Vec::new();
    validate_spec(&slice.spec, &mut errors);
    if let Some(old) = old {
        validate_immutable(&slice.spec, &old.spec, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// A taint without `timeAdded` keeps the time of the same taint in the old object, else gets now.
fn fill_time_added(taint: &mut DeviceTaint, old_device: Option<&Device>, policy: &AdmissionPolicy) {
    if taint.time_added.is_some() {
        return;
    }
    let earlier = old_device
        .and_then(|d| d.taints.as_ref())
        .and_then(|taints| {
            taints
                .iter()
                .find(|t| t.key == taint.key && t.value == taint.value && t.effect == taint.effect)
        })
        .and_then(|t| t.time_added.clone());
    taint.time_added = Some(earlier.unwrap_or(Time(policy.now)));
}

fn invalid(
    path: impl Into<String>,
    value: impl Into<String>,
    detail: impl Into<String>,
) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Invalid {
            value: value.into(),
            detail: detail.into(),
        },
    )
}

fn required(path: impl Into<String>, detail: impl Into<String>) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::Required {
            detail: detail.into(),
        },
    )
}

fn too_many(path: impl Into<String>, actual: usize, max: usize) -> FieldError {
    FieldError::new(path, FieldErrorKind::TooMany { actual, max })
}

fn validate_immutable(
    new: &ResourceSliceSpec,
    old: &ResourceSliceSpec,
    errors: &mut Vec<FieldError>,
) {
    if new.driver != old.driver {
        errors.push(invalid("spec.driver", &new.driver, "field is immutable"));
    }
    if new.node_name != old.node_name {
        errors.push(invalid(
            "spec.nodeName",
            new.node_name.as_deref().unwrap_or(""),
            "field is immutable",
        ));
    }
}

fn validate_spec(spec: &ResourceSliceSpec, errors: &mut Vec<FieldError>) {
    if spec.driver.is_empty() {
        errors.push(required("spec.driver", ""));
    } else if spec.driver.len() > 63 {
        errors.push(FieldError::new(
            "spec.driver",
            FieldErrorKind::TooLong { max: 63 },
        ));
    } else if let Some(detail) = dns_subdomain_problem(&spec.driver) {
        errors.push(invalid("spec.driver", &spec.driver, detail));
    }
    validate_pool(spec, errors);
    validate_node_selection(spec, errors);

    let devices = spec.devices.as_deref().unwrap_or_default();
    let counter_sets = spec.shared_counters.as_deref().unwrap_or_default();
    if spec.devices.is_some() && spec.shared_counters.is_some() {
        errors.push(FieldError::new(
            "spec.sharedCounters",
            FieldErrorKind::Forbidden {
                detail: "only one of `devices` and `sharedCounters` may be set".into(),
            },
        ));
    }
    let limited = devices.iter().any(|d| {
        d.taints.as_ref().is_some_and(|t| !t.is_empty())
            || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
    });
    let max_devices = if limited {
        MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES
    };
    if devices.len() > max_devices {
        errors.push(too_many("spec.devices", devices.len(), max_devices));
    }
    let per_device_selection = spec.per_device_node_selection == Some(true);
    let mut seen = std::collections::BTreeSet::new();
    for (i, device) in devices.iter().enumerate() {
        let path = format!("spec.devices[{i}]");
        if !device.name.is_empty() && !seen.insert(device.name.as_str()) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                FieldErrorKind::Duplicate {
                    value: device.name.clone(),
                },
            ));
        }
        validate_device(device, &path, per_device_selection, errors);
    }

    if counter_sets.len() > MAX_COUNTER_SETS {
        errors.push(too_many(
            "spec.sharedCounters",
            counter_sets.len(),
            MAX_COUNTER_SETS,
        ));
    }
    let mut set_names = std::collections::BTreeSet::new();
    for (i, set) in counter_sets.iter().enumerate() {
        let path = format!("spec.sharedCounters[{i}].name");
        if set.name.is_empty() {
            errors.push(required(path, ""));
        } else if let Some(detail) = dns_label_problem(&set.name) {
            errors.push(invalid(path, &set.name, detail));
        } else if !set_names.insert(set.name.as_str()) {
            errors.push(FieldError::new(
                path,
                FieldErrorKind::Duplicate {
                    value: set.name.clone(),
                },
            ));
        }
    }
}

fn validate_pool(spec: &ResourceSliceSpec, errors: &mut Vec<FieldError>) {
    let pool = &spec.pool;
    if pool.name.is_empty() {
        errors.push(required("spec.pool.name", ""));
    } else if pool.name.len() > 253 {
        errors.push(FieldError::new(
            "spec.pool.name",
            FieldErrorKind::TooLong { max: 253 },
        ));
    } else {
        for segment in pool.name.split('/') {
            if let Some(detail) = dns_subdomain_problem(segment) {
                errors.push(invalid(
                    "spec.pool.name",
                    &pool.name,
                    format!("each '/'-separated segment: {detail}"),
                ));
                break;
            }
        }
    }
    if pool.resource_slice_count <= 0 {
        errors.push(invalid(
            "spec.pool.resourceSliceCount",
            pool.resource_slice_count.to_string(),
            "must be greater than zero",
        ));
    }
    if pool.generation < 0 {
        errors.push(invalid(
            "spec.pool.generation",
            pool.generation.to_string(),
            "must be greater than or equal to zero",
        ));
    }
}

/// Exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`.
fn validate_node_selection(spec: &ResourceSliceSpec, errors: &mut Vec<FieldError>) {
    let mut set = Vec::new();
    if let Some(node) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        set.push("`nodeName`");
        if let Some(detail) = dns_subdomain_problem(node) {
            errors.push(invalid("spec.nodeName", node, detail));
        }
    }
    if let Some(selector) = &spec.node_selector {
        set.push("`nodeSelector`");
        if selector.node_selector_terms.len() != 1 {
            errors.push(invalid(
                "spec.nodeSelector.nodeSelectorTerms",
                format!("{} terms", selector.node_selector_terms.len()),
                "must have exactly one node selector term",
            ));
        }
    }
    if spec.all_nodes == Some(true) {
        set.push("`allNodes`");
    }
    if spec.per_device_node_selection == Some(true) {
        set.push("`perDeviceNodeSelection`");
    }
    const ONE_OF: &str = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required";
    match set.len() {
        0 => errors.push(required("spec", ONE_OF)),
        1 => {}
        _ => errors.push(invalid(
            "spec",
            format!("{{{}}}", set.join(", ")),
            format!("{ONE_OF}, but multiple fields are set"),
        )),
    }
}

fn validate_device(
    device: &Device,
    path: &str,
    per_device_selection: bool,
    errors: &mut Vec<FieldError>,
) {
    if device.name.is_empty() {
        errors.push(required(format!("{path}.name"), ""));
    } else if let Some(detail) = dns_label_problem(&device.name) {
        errors.push(invalid(format!("{path}.name"), &device.name, detail));
    }
    let attributes = device.attributes.as_ref();
    let capacity = device.capacity.as_ref();
    let total = attributes.map_or(0, |a| a.len()) + capacity.map_or(0, |c| c.len());
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        errors.push(FieldError::new(
            format!("{path}.attributes"),
            FieldErrorKind::TooMany {
                actual: total,
                max: MAX_ATTRIBUTES_AND_CAPACITIES,
            },
        ));
    }
    for (key, value) in attributes.into_iter().flatten() {
        let key_path = format!("{path}.attributes[{key}]");
        validate_qualified_key(key, &key_path, errors);
        validate_attribute(value, &key_path, errors);
    }
    for key in capacity.into_iter().flat_map(|c| c.keys()) {
        validate_qualified_key(key, &format!("{path}.capacity[{key}]"), errors);
    }
    let taints = device.taints.as_deref().unwrap_or_default();
    if taints.len() > MAX_TAINTS {
        errors.push(too_many(format!("{path}.taints"), taints.len(), MAX_TAINTS));
    }
    for (j, taint) in taints.iter().enumerate() {
        validate_taint(taint, &format!("{path}.taints[{j}]"), errors);
    }
    let consumptions = device.consumes_counters.as_deref().unwrap_or_default();
    if consumptions.len() > MAX_COUNTER_CONSUMPTIONS {
        errors.push(too_many(
            format!("{path}.consumesCounters"),
            consumptions.len(),
            MAX_COUNTER_CONSUMPTIONS,
        ));
    }
    let mut set = Vec::new();
    if device.node_name.as_deref().is_some_and(|n| !n.is_empty()) {
        set.push("nodeName");
    }
    if device.node_selector.is_some() {
        set.push("nodeSelector");
    }
    if device.all_nodes == Some(true) {
        set.push("allNodes");
    }
    if per_device_selection && set.len() != 1 {
        errors.push(invalid(
            path,
            format!("{{{}}}", set.join(", ")),
            "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required when `perDeviceNodeSelection` is set",
        ));
    } else if !per_device_selection {
        for field in set {
            errors.push(FieldError::new(
                format!("{path}.{field}"),
                FieldErrorKind::Forbidden {
                    detail: "only allowed when `perDeviceNodeSelection` is set".into(),
                },
            ));
        }
    }
}

/// Attribute and capacity keys: a C identifier ≤ 32, optionally `domain/` with a DNS subdomain ≤ 63.
fn validate_qualified_key(key: &str, path: &str, errors: &mut Vec<FieldError>) {
    let (domain, id) = match key.split_once('/') {
        Some((domain, id)) => (Some(domain), id),
        None => (None, key),
    };
    if let Some(domain) = domain {
        if domain.len() > 63 {
            errors.push(invalid(
                path,
                key,
                "the domain must be no more than 63 characters",
            ));
        } else if let Some(detail) = dns_subdomain_problem(domain) {
            errors.push(invalid(path, key, format!("the domain: {detail}")));
        }
    }
    if id.is_empty() {
        errors.push(required(path, "the name after the domain is required"));
    } else if id.len() > 32 {
        errors.push(invalid(
            path,
            key,
            "the name must be no more than 32 characters",
        ));
    } else if let Some(detail) = c_identifier_problem(id) {
        errors.push(invalid(path, key, detail));
    }
}

fn validate_attribute(value: &DeviceAttribute, path: &str, errors: &mut Vec<FieldError>) {
    let set = [
        value.int.is_some(),
        value.bool.is_some(),
        value.string.is_some(),
        value.version.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count();
    match set {
        0 => errors.push(required(path, "exactly one value must be specified")),
        1 => {}
        _ => errors.push(invalid(
            path,
            format!("{set} values"),
            "exactly one value must be specified",
        )),
    }
    if let Some(s) = &value.string
        && s.len() > MAX_ATTRIBUTE_STRING
    {
        errors.push(FieldError::new(
            format!("{path}.string"),
            FieldErrorKind::TooLong {
                max: MAX_ATTRIBUTE_STRING,
            },
        ));
    }
    if let Some(v) = &value.version {
        if v.len() > MAX_ATTRIBUTE_STRING {
            errors.push(FieldError::new(
                format!("{path}.version"),
                FieldErrorKind::TooLong {
                    max: MAX_ATTRIBUTE_STRING,
                },
            ));
        } else if !is_semver(v) {
            errors.push(invalid(
                format!("{path}.version"),
                v,
                "must be a string compatible with semver.org spec 2.0.0",
            ));
        }
    }
}

fn validate_taint(taint: &DeviceTaint, path: &str, errors: &mut Vec<FieldError>) {
    if taint.key.is_empty() {
        errors.push(required(format!("{path}.key"), ""));
    } else if let Some(detail) = qualified_name_problem(&taint.key) {
        errors.push(invalid(format!("{path}.key"), &taint.key, detail));
    }
    if let Some(value) = &taint.value
        && let Some(detail) = label_value_problem(value)
    {
        errors.push(invalid(format!("{path}.value"), value, detail));
    }
    if taint.effect.is_empty() {
        errors.push(required(format!("{path}.effect"), ""));
    } else if !TAINT_EFFECTS.contains(&taint.effect.as_str()) {
        errors.push(FieldError::new(
            format!("{path}.effect"),
            FieldErrorKind::NotSupported {
                value: taint.effect.clone(),
                supported: TAINT_EFFECTS,
            },
        ));
    }
}
