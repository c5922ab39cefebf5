//! Pure planning: a pool's content becomes the ResourceSlice specs of one pool.
//!
//! Devices are sorted by name and cut, in that order, into slices of at most
//! 128 devices, or 64 once a slice holds a tainted device (the API server's
//! limits). Counter sets follow the served version ([`ServerVersion`]): on
//! 1.35 and later they go, sorted by name, into slices of their own (8 sets
//! a slice), and a device slice holding a device that consumes counters takes
//! at most 64 devices; on 1.34 each group of counter sets tied together by
//! consumption goes into one slice with its consumers (groups first, by their
//! first set's name, then the devices consuming nothing), a slice holding at
//! most 32 shared counters and 1024 consumed ones. The same content
//! therefore always plans the same slices, which is what lets the publisher
//! see that nothing changed and write nothing. A pool with nothing in it
//! plans one empty slice, so the pool stays visible, at its new generation,
//! with no devices in it. Planning assumes content that
//! [`crate::validate_pool`] kept; anything else is planned as best it can be
//! and left for the API server to refuse.

use std::time::Duration;

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, Counter, CounterSet as ApiCounterSet,
    Device, DeviceAttribute, DeviceCapacity, DeviceCounterConsumption,
    DeviceTaint as ApiDeviceTaint, ResourcePool, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::device::{AttributeValue, Capacity, DraDevice};
use crate::keys::qualified_attribute_key;
use crate::pool::{CounterSet, PoolContent, counter_groups_of};
use crate::version::{ServerVersion, SliceLimits};

/// The shortest time between two write passes of a pool unless the
/// target says otherwise (`publish-interval-ms`).
pub const DEFAULT_MIN_WRITE_INTERVAL: Duration = Duration::from_secs(1);

pub use crate::version::{MAX_DEVICES_PER_SLICE, MAX_DEVICES_PER_TAINTED_SLICE};

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

/// Plans the ResourceSlice specs publishing `devices` (whole devices, no
/// counter sets) as the pool of `target` at `generation` (see the module docs).
pub fn plan_slices(
    target: &PoolTarget,
    devices: &[DraDevice],
    generation: i64,
) -> Vec<ResourceSliceSpec> {
    plan_parts(target, devices, &[], ServerVersion::default(), generation)
}

/// Plans the ResourceSlice specs publishing `content` as the pool of
/// `target` at `generation` on a server of `version` (see the module docs).
pub fn plan_pool(
    target: &PoolTarget,
    content: &PoolContent,
    version: ServerVersion,
    generation: i64,
) -> Vec<ResourceSliceSpec> {
    plan_parts(
        target,
        &content.devices,
        &content.counter_sets,
        version,
        generation,
    )
}

/// The content of one planned slice.
#[derive(Default)]
struct Chunk<'a> {
    devices: Vec<&'a DraDevice>,
    sets: Vec<&'a CounterSet>,
    /// Whether this is a slice of counter sets only (1.35 and later).
    sets_only: bool,
    tainted: bool,
    consumes: bool,
    shared_counters: usize,
    consumed_counters: usize,
}

impl<'a> Chunk<'a> {
    /// Whether `devices` and `sets` fit in this chunk besides what it holds.
    fn fits(
        &self,
        devices: &[&'a DraDevice],
        sets: &[&'a CounterSet],
        limits: &SliceLimits,
    ) -> bool {
        let tainted = self.tainted || devices.iter().any(|d| !d.taints.is_empty());
        let consumes = self.consumes || devices.iter().any(|d| d.consumes_any_counter());
        let device_count = self.devices.len() + devices.len();
        let shared = self.shared_counters + sets.iter().map(|s| s.counters.len()).sum::<usize>();
        let consumed =
            self.consumed_counters + devices.iter().map(|d| consumed_counters(d)).sum::<usize>();
        device_count <= limits.device_limit(tainted, consumes)
            && limits
                .max_counters_per_slice
                .is_none_or(|max| shared <= max)
            && limits
                .max_consumed_counters_per_slice
                .is_none_or(|max| consumed <= max)
    }

    fn add(&mut self, devices: &[&'a DraDevice], sets: &[&'a CounterSet]) {
        self.tainted |= devices.iter().any(|d| !d.taints.is_empty());
        self.consumes |= devices.iter().any(|d| d.consumes_any_counter());
        self.shared_counters += sets.iter().map(|s| s.counters.len()).sum::<usize>();
        self.consumed_counters += devices.iter().map(|d| consumed_counters(d)).sum::<usize>();
        self.devices.extend_from_slice(devices);
        self.sets.extend_from_slice(sets);
    }
}

fn consumed_counters(device: &DraDevice) -> usize {
    device
        .consumes_counters
        .iter()
        .map(|c| c.counters.len())
        .sum()
}

/// Adds `devices` and `sets` (what must share a slice) to the last chunk
/// when they fit, to a new one otherwise.
fn pack<'a>(
    chunks: &mut Vec<Chunk<'a>>,
    devices: &[&'a DraDevice],
    sets: &[&'a CounterSet],
    limits: &SliceLimits,
) {
    let fits = chunks
        .last()
        .is_some_and(|last| !last.sets_only && last.fits(devices, sets, limits));
    if !fits {
        chunks.push(Chunk::default());
    }
    chunks
        .last_mut()
        .expect("a chunk was just ensured")
        .add(devices, sets);
}

fn plan_parts(
    target: &PoolTarget,
    devices: &[DraDevice],
    counter_sets: &[CounterSet],
    version: ServerVersion,
    generation: i64,
) -> Vec<ResourceSliceSpec> {
    let limits = version.limits();
    let by_name = |a: &&DraDevice, b: &&DraDevice| a.name.cmp(&b.name);
    let mut chunks: Vec<Chunk<'_>> = Vec::new();
    if version.separates_counter_sets() {
        let mut sets: Vec<&CounterSet> = counter_sets.iter().collect();
        sets.sort_by(|a, b| a.name.cmp(&b.name));
        let per_slice = limits
            .max_counter_sets_per_slice
            .unwrap_or(usize::MAX)
            .max(1);
        for group in sets.chunks(per_slice) {
            chunks.push(Chunk {
                sets: group.to_vec(),
                sets_only: true,
                ..Chunk::default()
            });
        }
        let mut sorted: Vec<&DraDevice> = devices.iter().collect();
        sorted.sort_by(by_name);
        for device in sorted {
            pack(&mut chunks, &[device], &[], &limits);
        }
    } else {
        let groups = counter_groups_of(devices, counter_sets);
        let mut grouped = vec![false; devices.len()];
        for group in &groups {
            let members: Vec<&DraDevice> = group
                .devices
                .iter()
                .map(|&index| {
                    grouped[index] = true;
                    &devices[index]
                })
                .collect();
            let sets: Vec<&CounterSet> = group
                .sets
                .iter()
                .map(|&index| &counter_sets[index])
                .collect();
            pack(&mut chunks, &members, &sets, &limits);
        }
        let mut free: Vec<&DraDevice> = devices
            .iter()
            .zip(&grouped)
            .filter(|(_, grouped)| !**grouped)
            .map(|(device, _)| device)
            .collect();
        free.sort_by(by_name);
        for device in free {
            pack(&mut chunks, &[device], &[], &limits);
        }
    }
    if chunks.is_empty() {
        chunks.push(Chunk::default());
    }

    let slice_count = chunks.len() as i64;
    chunks
        .into_iter()
        .map(|mut chunk| {
            chunk.devices.sort_by(by_name);
            chunk.sets.sort_by(|a, b| a.name.cmp(&b.name));
            let shared_counters = (!chunk.sets.is_empty())
                .then(|| chunk.sets.iter().map(|set| api_counter_set(set)).collect());
            let devices = (!chunk.sets_only).then(|| {
                chunk
                    .devices
                    .iter()
                    .map(|device| api_device(&target.driver, device))
                    .collect()
            });
            ResourceSliceSpec {
                driver: target.driver.clone(),
                node_name: Some(target.node_name.clone()),
                pool: ResourcePool {
                    name: target.pool_name.clone(),
                    generation,
                    resource_slice_count: slice_count,
                },
                devices,
                shared_counters,
                ..ResourceSliceSpec::default()
            }
        })
        .collect()
}

fn api_counters(counters: &BTreeMap<String, String>) -> BTreeMap<String, Counter> {
    counters
        .iter()
        .map(|(name, value)| {
            (
                name.clone(),
                Counter {
                    value: ApiQuantity(value.clone()),
                },
            )
        })
        .collect()
}

fn api_counter_set(set: &CounterSet) -> ApiCounterSet {
    ApiCounterSet {
        name: set.name.clone(),
        counters: api_counters(&set.counters),
    }
}

fn api_capacity(capacity: &Capacity) -> DeviceCapacity {
    let quantity = |text: &String| ApiQuantity(text.clone());
    DeviceCapacity {
        value: quantity(&capacity.value),
        request_policy: capacity
            .request_policy
            .as_ref()
            .map(|policy| CapacityRequestPolicy {
                default: policy.default.as_ref().map(quantity),
                valid_values: (!policy.valid_values.is_empty())
                    .then(|| policy.valid_values.iter().map(quantity).collect()),
                valid_range: policy
                    .valid_range
                    .as_ref()
                    .map(|range| CapacityRequestPolicyRange {
                        min: quantity(&range.min),
                        max: range.max.as_ref().map(quantity),
                        step: range.step.as_ref().map(quantity),
                    }),
            }),
    }
}

/// The API form of one device: attributes qualified, capacities named as
/// written, taints without `timeAdded`.
fn api_device(driver: &str, device: &DraDevice) -> Device {
    let attributes = device
        .attributes
        .iter()
        .map(|(key, value)| (qualified_attribute_key(driver, key), api_attribute(value)))
        .collect::<BTreeMap<_, _>>();
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
    // Capacity names as the guest wrote them: an unqualified name is the
    // driver's by the API's rule, and the scheduler matches a claim's
    // `capacity.requests` to a device's capacity by the exact key, so a
    // request written as Kubernetes' examples write it (`memory: 10Gi`)
    // finds a capacity published as `memory` and never one published as
    // `<driver>/memory` (the real kube-scheduler 1.37, tests/cluster).
    let capacity: BTreeMap<String, DeviceCapacity> = device
        .capacity
        .iter()
        .map(|(key, capacity)| (key.clone(), api_capacity(capacity)))
        .collect();
    let consumes_counters: Vec<DeviceCounterConsumption> = device
        .consumes_counters
        .iter()
        .map(|consumption| DeviceCounterConsumption {
            counter_set: consumption.counter_set.clone(),
            counters: api_counters(&consumption.counters),
        })
        .collect();
    Device {
        name: device.name.clone(),
        attributes: (!attributes.is_empty()).then_some(attributes),
        capacity: (!capacity.is_empty()).then_some(capacity),
        consumes_counters: (!consumes_counters.is_empty()).then_some(consumes_counters),
        allow_multiple_allocations: device.allow_multiple_allocations.then_some(true),
        taints: (!taints.is_empty()).then_some(taints),
        binding_conditions: device.binding.as_ref().map(|b| b.ready.clone()),
        binding_failure_conditions: device.binding.as_ref().map(|b| b.failed.clone()),
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
