//! Pure planning: a device list becomes the ResourceSlice specs of one pool.
//!
//! Devices are sorted by name and cut, in that order, into slices of at most
//! 128 devices, or 64 once a slice holds a tainted device (the API server's
//! limits). The same devices therefore always plan the same slices, which is
//! what lets the publisher see that nothing changed and write nothing. An
//! empty device list plans one empty slice, so the pool stays visible, at its
//! new generation, with no devices in it.

use std::time::Duration;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceTaint as ApiDeviceTaint, ResourcePool, ResourceSliceSpec,
};

use crate::device::{AttributeValue, DraDevice};

/// The shortest time between two write passes of a pool unless the
/// target says otherwise (`publish-interval-ms`).
pub const DEFAULT_MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);

/// At most this many devices in one ResourceSlice.
pub const MAX_DEVICES_PER_SLICE: usize = 128;
/// At most this many devices in a ResourceSlice holding any tainted device.
pub const MAX_DEVICES_PER_TAINTED_SLICE: usize = 64;

/// Where a device list is published: one driver's pool on one node, and how
/// often the publisher may write it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PoolTarget {
    /// The DRA driver name (`spec.driver`), a DNS subdomain.
    pub driver: String,
    /// The node (`spec.nodeName`).
    pub node_name: String,
    /// The pool (`spec.pool.name`); the node name unless chosen otherwise.
    pub pool_name: String,
    /// The shortest time between the starts of two publisher passes over the
    /// pool (`publish-interval-ms`); [`DEFAULT_MIN_WRITE_INTERVAL`] unless chosen.
    pub min_write_interval: Duration,
}

impl PoolTarget {
    /// The target for `driver` on `node_name`, in the pool named after the node.
    pub fn new(driver: impl Into<String>, node_name: impl Into<String>) -> Self {
        let node_name = node_name.into();
        Self {
            driver: driver.into(),
            pool_name: node_name.clone(),
            node_name,
            min_write_interval: DEFAULT_MIN_WRITE_INTERVAL,
        }
    }

    /// The same target with `interval` between the starts of two passes
    /// (see `PublisherHandle::set_min_write_interval`).
    pub fn with_min_write_interval(mut self, interval: Duration) -> Self {
        self.min_write_interval = interval;
        self
    }

    /// Names this target in messages: `driver X on node Y`.
    pub fn describe(&self) -> String {
        format!("driver {} on node {}", self.driver, self.node_name)
    }
}

/// The attribute key as written: unqualified keys get the driver's domain.
pub fn qualified_attribute_key(driver: &str, key: &str) -> String {
    if key.contains('/') {
        key.to_owned()
    } else {
        format!("{driver}/{key}")
    }
}

/// Plans the ResourceSlice specs publishing `devices` as the pool of `target`
/// at `generation` (see the module docs).
pub fn plan_slices(
    target: &PoolTarget,
    devices: &[DraDevice],
    generation: i64,
) -> Vec<ResourceSliceSpec> {
    let mut sorted: Vec<&DraDevice> = devices.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));

    let mut chunks: Vec<Vec<&DraDevice>> = vec![Vec::new()];
    let mut chunk_tainted = false;
    for device in sorted {
        let tainted = chunk_tainted || !device.taints.is_empty();
        let limit = if tainted {
            MAX_DEVICES_PER_TAINTED_SLICE
        } else {
            MAX_DEVICES_PER_SLICE
        };
        let current = chunks.last_mut().expect("chunks start non-empty");
        if current.len() < limit {
            current.push(device);
            chunk_tainted = tainted;
        } else {
            chunks.push(vec![device]);
            chunk_tainted = !device.taints.is_empty();
        }
    }

    let slice_count = chunks.len() as i64;
    chunks
        .into_iter()
        .map(|chunk| ResourceSliceSpec {
            driver: target.driver.clone(),
            node_name: Some(target.node_name.clone()),
            pool: ResourcePool {
                name: target.pool_name.clone(),
                generation,
                resource_slice_count: slice_count,
            },
            devices: Some(
                chunk
                    .into_iter()
                    .map(|device| api_device(&target.driver, device))
                    .collect(),
            ),
            ..ResourceSliceSpec::default()
        })
        .collect()
}

/// The API form of one device: attributes qualified, taints without `timeAdded`.
fn api_device(driver: &str, device: &DraDevice) -> Device {
    let attributes = device
        .attributes
        .iter()
        .map(|(key, value)| (qualified_attribute_key(driver, key), api_attribute(value)))
        .collect::<std::collections::BTreeMap<_, _>>();
    let taints: Vec<ApiDeviceTaint> = device
        .taints
        .iter()
        .map(|taint| ApiDeviceTaint {
            key: taint.key.clone(),
            value: (!taint.value.is_empty()).then(|| taint.value.clone()),
            effect: taint.effect.as_str().to_owned(),
            time_added: None,
        })
        .collect();
    Device {
        name: device.name.clone(),
        attributes: (!attributes.is_empty()).then_some(attributes),
        taints: (!taints.is_empty()).then_some(taints),
        ..Device::default()
    }
}

fn api_attribute(value: &AttributeValue) -> DeviceAttribute {
    match value {
        AttributeValue::Int(number) => DeviceAttribute {
            int: Some(*number),
            ..DeviceAttribute::default()
        },
        AttributeValue::Bool(flag) => DeviceAttribute {
            bool: Some(*flag),
            ..DeviceAttribute::default()
        },
        AttributeValue::String(text) => DeviceAttribute {
            string: Some(text.clone()),
            ..DeviceAttribute::default()
        },
        AttributeValue::Version(version) => DeviceAttribute {
            version: Some(version.clone()),
            ..DeviceAttribute::default()
        },
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
