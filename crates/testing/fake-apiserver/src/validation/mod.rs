//! ResourceSlice admission as the API server of the served version (1.34+) does it: fields a
//! disabled feature gate drops ([`drops`]), server-filled taint times, then validation of `spec`
//! with every error named by its field path (`spec.devices[3].name`,
//! `spec.devices[0].attributes[example.com/model]`, …). The counter rules are in [`counters`],
//! the capacity rules in [`capacity`]; the ResourceClaim status rules in [`claim_status`].

mod capacity;
mod claim_status;
mod counters;
mod device_id;
mod drops;
mod field;
mod keys;
mod names;
mod quantity;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceTaint, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::admission::AdmissionPolicy;
use crate::status::FieldError;
pub(crate) use claim_status::{admit_claim_status, claim_body_problem};
use field::{forbidden, invalid, invalid_unquoted, not_supported, required, too_long, too_many};
use keys::validate_qualified_key;
pub(crate) use names::dns_subdomain_problem;
use names::{is_semver, label_value_problem, qualified_name_problem};
use quantity::Quantity;
pub(crate) use quantity::QuantityError;

/// Devices per slice.
const MAX_DEVICES: usize = 128;
/// 1.35+: devices per slice when any device has taints or consumes counters.
const MAX_DEVICES_WITH_TAINTS_OR_COUNTERS: usize = 64;
/// Attributes plus capacities per device.
const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// 1.34: taints per device.
const MAX_TAINTS_1_34: usize = 4;
/// 1.35+: taints per device.
const MAX_TAINTS: usize = 16;
/// Length of attribute strings and versions.
const MAX_ATTRIBUTE_STRING: usize = 64;
/// The taint effects a 1.34 server accepts.
const TAINT_EFFECTS_1_34: &[&str] = &["NoExecute", "NoSchedule"];
/// The taint effects a 1.35+ server accepts (`None`: the taint only informs).
const TAINT_EFFECTS: &[&str] = &["NoExecute", "NoSchedule", "None"];

/// The first quantity of `slice` that does not parse: the real server cannot decode such a body
/// and answers 400 before any validation.
pub(crate) fn slice_body_problem(slice: &ResourceSlice) -> Option<QuantityError> {
    let spec = &slice.spec;
    let counters = spec
        .shared_counters
        .iter()
        .flatten()
        .flat_map(|set| set.counters.values());
    let devices = spec.devices.iter().flatten();
    let consumed = devices
        .clone()
        .flat_map(|d| d.consumes_counters.iter().flatten())
        .flat_map(|c| c.counters.values());
    let mut texts: Vec<&str> = counters
        .chain(consumed)
        .map(|c| c.value.0.as_str())
        .collect();
    for capacity in devices.flat_map(|d| d.capacity.iter().flat_map(|c| c.values())) {
        texts.push(&capacity.value.0);
        if let Some(policy) = &capacity.request_policy {
            texts.extend(policy.default.iter().map(|q| q.0.as_str()));
            texts.extend(policy.valid_values.iter().flatten().map(|q| q.0.as_str()));
            if let Some(range) = &policy.valid_range {
                texts.push(&range.min.0);
                texts.extend(range.max.iter().chain(&range.step).map(|q| q.0.as_str()));
            }
        }
    }
    texts.into_iter().find_map(|t| Quantity::parse(t).err())
}

/// Runs admission on a slice being created (`old` is `None`) or updated.
pub(crate) fn admit_slice(
    slice: &mut ResourceSlice,
    old: Option<&ResourceSlice>,
    policy: &AdmissionPolicy,
) -> Result<(), Vec<FieldError>> {
    drops::drop_disabled_fields(slice, old, policy.disabled);
    for device in slice.spec.devices.iter_mut().flatten() {
        let old_device = old.and_then(|o| find_device(&o.spec, &device.name));
        for taint in device.taints.iter_mut().flatten() {
            fill_time_added(taint, old_device, policy);
        }
    }
    let mut errors = Vec::new();
    validate_spec(&slice.spec, old.map(|o| &o.spec), policy, &mut errors);
    if let Some(old) = old {
        validate_immutable(&slice.spec, &old.spec, &mut errors);
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn find_device<'a>(spec: &'a ResourceSliceSpec, name: &str) -> Option<&'a Device> {
    spec.devices.iter().flatten().find(|d| d.name == name)
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

fn validate_immutable(
    new: &ResourceSliceSpec,
    old: &ResourceSliceSpec,
    errors: &mut Vec<FieldError>,
) {
    if new.driver != old.driver {
        errors.push(invalid("spec.driver", &new.driver, "field is immutable"));
    }
    if new.pool.name != old.pool.name {
        errors.push(invalid(
            "spec.pool.name",
            &new.pool.name,
            "field is immutable",
        ));
    }
    if new.node_name != old.node_name {
        errors.push(invalid(
            "spec.nodeName",
            new.node_name.as_deref().unwrap_or(""),
            "field is immutable",
        ));
    }
}

fn validate_spec(
    spec: &ResourceSliceSpec,
    old: Option<&ResourceSliceSpec>,
    policy: &AdmissionPolicy,
    errors: &mut Vec<FieldError>,
) {
    device_id::validate_driver_name(&spec.driver, "spec.driver", errors);
    validate_pool(spec, errors);
    validate_node_selection(spec, errors);

    let per_pool = policy.rules_from_1_35();
    let devices = spec.devices.as_deref().unwrap_or_default();
    let limited = per_pool
        && devices.iter().any(|d| {
            d.taints.as_ref().is_some_and(|t| !t.is_empty())
                || d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
        });
    let max_devices = if limited {
        MAX_DEVICES_WITH_TAINTS_OR_COUNTERS
    } else {
        MAX_DEVICES
    };
    if devices.len() > max_devices {
        // The real server stops at the size, without looking at the devices.
        errors.push(too_many("spec.devices", devices.len(), max_devices));
    } else {
        let slice_sets = (!per_pool).then(|| counters::slice_counters(spec));
        let context = DeviceContext {
            per_device_selection: spec.per_device_node_selection == Some(true),
            max_taints: if per_pool {
                MAX_TAINTS
            } else {
                MAX_TAINTS_1_34
            },
            taint_effects: if per_pool {
                TAINT_EFFECTS
            } else {
                TAINT_EFFECTS_1_34
            },
            slice_sets: slice_sets.as_ref(),
        };
        let mut seen = std::collections::BTreeSet::new();
        for (i, device) in devices.iter().enumerate() {
            let path = format!("spec.devices[{i}]");
            if !device.name.is_empty() && !seen.insert(device.name.as_str()) {
                errors.push(field::duplicate(format!("{path}.name"), &device.name));
            }
            let old_device = old.and_then(|o| find_device(o, &device.name));
            validate_device(device, old_device, &path, &context, errors);
        }
        if !per_pool {
            counters::validate_slice_consumption_total(devices, errors);
        }
    }
    counters::validate_counter_sets(spec, per_pool, errors);
}

/// What a device's validation needs to know about its slice and the served version.
struct DeviceContext<'a> {
    per_device_selection: bool,
    max_taints: usize,
    /// The taint effects accepted (`None` from 1.35 on).
    taint_effects: &'static [&'static str],
    /// 1.34: the slice's counter sets, which consumptions must reference.
    slice_sets: Option<&'a counters::SliceCounters<'a>>,
}

fn validate_pool(spec: &ResourceSliceSpec, errors: &mut Vec<FieldError>) {
    let pool = &spec.pool;
    device_id::validate_pool_name(&pool.name, "spec.pool.name", errors);
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
    old: Option<&Device>,
    path: &str,
    context: &DeviceContext<'_>,
    errors: &mut Vec<FieldError>,
) {
    device_id::validate_device_name(&device.name, &format!("{path}.name"), errors);
    let attributes = device.attributes.as_ref();
    let total = attributes.map_or(0, |a| a.len()) + device.capacity.as_ref().map_or(0, |c| c.len());
    if total > MAX_ATTRIBUTES_AND_CAPACITIES {
        errors.push(invalid_unquoted(
            path,
            total,
            format!(
                "the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
            ),
        ));
    }
    for (key, value) in attributes.into_iter().flatten() {
        let key_path = format!("{path}.attributes[{key}]");
        validate_qualified_key(key, &key_path, errors);
        validate_attribute(value, &key_path, errors);
    }
    capacity::validate_capacity(device, old, path, errors);
    let taints = device.taints.as_deref().unwrap_or_default();
    if taints.len() > context.max_taints {
        errors.push(too_many(
            format!("{path}.taints"),
            taints.len(),
            context.max_taints,
        ));
    } else {
        for (j, taint) in taints.iter().enumerate() {
            validate_taint(taint, &format!("{path}.taints[{j}]"), context, errors);
        }
    }
    counters::validate_consumptions(device, path, context.slice_sets, errors);
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
    if context.per_device_selection && set.len() != 1 {
        errors.push(invalid(
            path,
            format!("{{{}}}", set.join(", ")),
            "exactly one of `nodeName`, `nodeSelector`, `allNodes` is required when `perDeviceNodeSelection` is set",
        ));
    } else if !context.per_device_selection {
        for field in set {
            errors.push(forbidden(
                format!("{path}.{field}"),
                "only allowed when `perDeviceNodeSelection` is set",
            ));
        }
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
        errors.push(too_long(format!("{path}.string"), MAX_ATTRIBUTE_STRING));
    }
    if let Some(v) = &value.version {
        if v.len() > MAX_ATTRIBUTE_STRING {
            errors.push(too_long(format!("{path}.version"), MAX_ATTRIBUTE_STRING));
        } else if !is_semver(v) {
            errors.push(invalid(
                format!("{path}.version"),
                v,
                "must be a string compatible with semver.org spec 2.0.0",
            ));
        }
    }
}

fn validate_taint(
    taint: &DeviceTaint,
    path: &str,
    context: &DeviceContext<'_>,
    errors: &mut Vec<FieldError>,
) {
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
    } else if !context.taint_effects.contains(&taint.effect.as_str()) {
        errors.push(not_supported(
            format!("{path}.effect"),
            &taint.effect,
            context.taint_effects,
        ));
    }
}
