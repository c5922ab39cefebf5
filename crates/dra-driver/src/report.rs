//! What `check` prints of a DRA resource: each device's DRA name, the
//! counter sets, partitions and capacities the `dra-layout` guest
//! described as they will be published, the attributes the API server
//! would drop and the slice fields it would refuse, computed with the same
//! code that publishes.

use std::collections::HashMap;

use wdp_dra_client::{
    AttributeValue, CounterSet, DraDevice, PoolContent, PoolTarget, ServerVersion,
};
use wdp_policy::Hook;
use wdp_resource::ResourceSpec;
use wdp_resource::{DeviceSet, Resource};

use crate::devices::DraDeviceList;
use crate::error::DraError;
use crate::standard_attributes::STANDARD_PREFIX;

/// What `check` prints of a DRA resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraReport {
    /// The driver name.
    pub driver: String,
    /// Each published device: (device ID, DRA device name).
    pub names: Vec<(String, String)>,
    /// The Kubernetes standard attributes of each published device, by
    /// device ID, as `name=value` (`pcieRoot=pci0000:15`); devices with
    /// none are left out.
    pub standard_attributes: Vec<(String, Vec<String>)>,
    /// The layout as published, one line per counter set, partition and
    /// device with counters or capacity (e.g. `counter set gpu-0000-03-00-0: memory=80Gi slices=7`).
    pub layout: Vec<String>,
    /// Attributes left out, and the slice rejections `validate` predicts.
    pub problems: Vec<String>,
}

/// The DRA report of `resource` served as `driver`; refuses (naming the
/// file and the device) a device ID that cannot become a DRA name.
pub fn dra_report(resource: &Resource, driver: &str) -> Result<DraReport, DraError> {
    let set = resource.devices();
    let list = crate::devices::dra_devices(driver, &set);
    refuse_unpublishable(&resource.spec(), &list)?;
    let names: Vec<(String, String)> = set
        .devices()
        .iter()
        .filter_map(|d| {
            let name = wdp_k8s_naming::device_name(d.id()).ok()?;
            Some((d.id().to_owned(), name))
        })
        .collect();
    let by_name: HashMap<&str, &DraDevice> =
        list.devices.iter().map(|d| (d.name.as_str(), d)).collect();
    let standard_attributes = names
        .iter()
        .filter_map(|(id, name)| {
            let standard = standard_attribute_texts(by_name.get(name.as_str())?);
            (!standard.is_empty()).then(|| (id.clone(), standard))
        })
        .collect();
    let layout = layout_lines(&list.devices, &list.counter_sets);
    let mut problems: Vec<String> = list.problems.iter().map(ToString::to_string).collect();
    let content = PoolContent {
        devices: list.devices.clone(),
        counter_sets: list.counter_sets.clone(),
    };
    let mut layout = layout;
    layout.extend(slice_lines(driver, &content));
    layout.extend(crate::passthrough::plan_lines(resource, &set));
    problems.extend(
        wdp_dra_client::validate_pool(driver, &content, ServerVersion::V1_34)
            .problems
            .iter()
            .map(|p| match &p.device {
                Some(device) => format!("device {device}: {}: {}", p.field, p.message),
                None => format!("{}: {}", p.field, p.message),
            }),
    );
    Ok(DraReport {
        driver: driver.to_owned(),
        names,
        standard_attributes,
        layout,
        problems,
    })
}

/// What `check`, the first load and every reload refuse alike in a DRA
/// resource's device set (`set`, as `spec` would advertise it): a device
/// or partition whose ID has no DRA name, which would silently be left out
/// of the pool. The error names the resource file and, when a guest made
/// the device (discovery) or the partition (dra-layout), that guest and
/// hook.
pub fn check_publishable(
    spec: &ResourceSpec,
    driver: &str,
    set: &DeviceSet,
) -> Result<(), DraError> {
    refuse_unpublishable(spec, &crate::devices::dra_devices(driver, set))
}

fn refuse_unpublishable(spec: &ResourceSpec, list: &DraDeviceList) -> Result<(), DraError> {
    let Some(unnamed) = list
        .problems
        .iter()
        .find(|p| matches!(p, crate::devices::DeviceProblem::Unnamed { .. }))
    else {
        return Ok(());
    };
    let made_by = [Hook::DraLayout, Hook::Discovery]
        .into_iter()
        .find_map(|hook| {
            spec.bound(hook)
                .map(|(_, guest)| (hook, guest.name().to_owned()))
        });
    let problem = match made_by {
        Some((hook, guest)) => format!("guest {guest}, hook {hook}: {unnamed}"),
        None => unnamed.to_string(),
    };
    Err(DraError::UnnamedDevice {
        file: spec.config.file.clone(),
        problem,
    })
}

/// The `resource.kubernetes.io/` attributes of `device` as `name=value`.
fn standard_attribute_texts(device: &DraDevice) -> Vec<String> {
    device
        .attributes
        .iter()
        .filter_map(|(key, value)| {
            let name = key.strip_prefix(STANDARD_PREFIX)?;
            let value = match value {
                AttributeValue::Int(number) => number.to_string(),
                AttributeValue::Bool(flag) => flag.to_string(),
                AttributeValue::String(text) | AttributeValue::Version(text) => text.clone(),
            };
            Some(format!("{name}={value}"))
        })
        .collect()
}

/// How the pool is cut into slices on a 1.34 server and on later ones,
/// with the bytes of their JSON specs (what the API server stores).
fn slice_lines(driver: &str, content: &PoolContent) -> Vec<String> {
    let target = PoolTarget::new(driver, "<node>");
    [
        ("1.34", ServerVersion::V1_34),
        ("1.35+", ServerVersion::V1_35),
    ]
    .into_iter()
    .map(|(label, version)| {
        let slices = wdp_dra_client::plan_pool(&target, content, version, 1);
        let bytes: usize = slices
            .iter()
            .map(|spec| serde_json::to_vec(spec).map_or(0, |json| json.len()))
            .sum();
        format!(
            "published on a {label} server: {} slices, {bytes} bytes of slice specs",
            slices.len()
        )
    })
    .collect()
}

/// `name=value` pairs, space-separated.
fn amounts(map: &std::collections::BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines of [`DraReport::layout`].
fn layout_lines(devices: &[DraDevice], counter_sets: &[CounterSet]) -> Vec<String> {
    let mut lines: Vec<String> = counter_sets
        .iter()
        .map(|set| format!("counter set {}: {}", set.name, amounts(&set.counters)))
        .collect();
    for device in devices {
        let mut parts: Vec<String> = Vec::new();
        if let Some(parent) = &device.partition_of {
            parts.push(format!("partition of {parent}"));
        }
        for consumption in &device.consumes_counters {
            parts.push(format!(
                "consumes {} from {}",
                amounts(&consumption.counters),
                consumption.counter_set
            ));
        }
        for (name, capacity) in &device.capacity {
            let mut text = format!("capacity {name}={}", capacity.value);
            if let Some(policy) = &capacity.request_policy {
                if let Some(default) = &policy.default {
                    text.push_str(&format!(", default {default}"));
                }
                if !policy.valid_values.is_empty() {
                    text.push_str(&format!(", values {}", policy.valid_values.join("|")));
                }
                if let Some(range) = &policy.valid_range {
                    text.push_str(&format!(
                        ", range {}..{}{}",
                        range.min,
                        range.max.as_deref().unwrap_or(""),
                        range
                            .step
                            .as_deref()
                            .map(|s| format!(" step {s}"))
                            .unwrap_or_default()
                    ));
                }
            }
            parts.push(text);
        }
        if device.allow_multiple_allocations {
            parts.push("shared by several claims".to_owned());
        }
        for taint in &device.taints {
            parts.push(format!(
                "taint {}={}:{}",
                taint.key, taint.value, taint.effect
            ));
        }
        if !parts.is_empty() {
            lines.push(format!("device {}: {}", device.name, parts.join("; ")));
        }
    }
    lines
}
