//! The devices this crate publishes, in plain Rust terms (no Kubernetes types).
//!
//! The host fills these from its discovery and health results; [`crate::plan`]
//! turns them into `resource.k8s.io/v1` ResourceSlice content. Besides
//! attributes and taints a device may consume counters of the pool's counter
//! sets (a partition of a bigger device, KEP-4815), and it may have
//! capacities, shared between several allocations when
//! `allow_multiple_allocations` is set (consumable capacity, KEP-5075).
//! Quantities are kept as the API spells them (`"40Gi"`, `"500m"`); the
//! validation checks them.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One device as published in a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraDevice {
    /// The DRA device name, a DNS label (see `wdp_k8s_naming::device_name`).
    pub name: String,
    /// Attributes by key. A key without a `domain/` prefix is qualified with
    /// the driver name when written (`model` → `gpu.example.com/model`); a key
    /// such as `resource.kubernetes.io/numaNode` is kept as given.
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Taints: an unhealthy device is tainted rather than dropped, so the
    /// scheduler stops placing new claims on it.
    pub taints: Vec<DeviceTaint>,
    /// The counters this device uses up while allocated, at most one entry
    /// per counter set of the pool (`consumesCounters`).
    pub consumes_counters: Vec<CounterConsumption>,
    /// Capacities by name, keyed like attributes (an unqualified name gets
    /// the driver's domain).
    pub capacity: BTreeMap<String, Capacity>,
    /// Whether several requests may be allocated this device at once, each
    /// taking part of its capacities (`allowMultipleAllocations`).
    pub allow_multiple_allocations: bool,
    /// The DRA name of the whole device this one is a partition of; `None`
    /// for a whole device. Not published: when the cluster cannot take
    /// partitions, the publisher leaves out the devices that have it.
    pub partition_of: Option<String>,
    /// Conditions the scheduler waits for, in the claim's device status,
    /// before it binds a pod allocated this device (`bindingConditions`,
    /// KEP-5007): the driver has to do something first, such as binding
    /// the device to another kernel driver. Empty for most devices.
    pub binding: Option<BindingConditions>,
}

/// What a device with binding conditions publishes: the conditions that
/// must all be `True` before the pod is bound, and those of which any
/// `True` fails the allocation (the scheduler then tries again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingConditions {
    /// `bindingConditions`: at most 4 condition types.
    pub ready: Vec<String>,
    /// `bindingFailureConditions`: at most 4 condition types.
    pub failed: Vec<String>,
}

impl DraDevice {
    /// A device with this name and no attributes or taints.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            attributes: BTreeMap::new(),
            taints: Vec::new(),
            consumes_counters: Vec::new(),
            capacity: BTreeMap::new(),
            allow_multiple_allocations: false,
            partition_of: None,
            binding: None,
        }
    }

    /// This device with one more attribute (builder style).
    pub fn with_attribute(mut self, key: impl Into<String>, value: AttributeValue) -> Self {
        self.attributes.insert(key.into(), value);
        self
    }

    /// This device with one more taint (builder style).
    pub fn with_taint(mut self, taint: DeviceTaint) -> Self {
        self.taints.push(taint);
        self
    }

    /// This device consuming `counters` (name → quantity) of the counter set
    /// `counter_set` (builder style).
    pub fn consuming<K, V>(
        mut self,
        counter_set: impl Into<String>,
        counters: impl IntoIterator<Item = (K, V)>,
    ) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        self.consumes_counters.push(CounterConsumption {
            counter_set: counter_set.into(),
            counters: counters
                .into_iter()
                .map(|(name, value)| (name.into(), value.into()))
                .collect(),
        });
        self
    }

    /// This device with one more capacity (builder style).
    pub fn with_capacity(mut self, name: impl Into<String>, capacity: Capacity) -> Self {
        self.capacity.insert(name.into(), capacity);
        self
    }

    /// This device allocatable to several requests at once (builder style).
    pub fn shared(mut self) -> Self {
        self.allow_multiple_allocations = true;
        self
    }

    /// This device as a partition of the whole device `whole` (builder style).
    pub fn partition_of(mut self, whole: impl Into<String>) -> Self {
        self.partition_of = Some(whole.into());
        self
    }

    /// Whether this device consumes any counters.
    pub fn consumes_any_counter(&self) -> bool {
        !self.consumes_counters.is_empty()
    }

    /// Whether this device uses consumable capacity: shared between
    /// allocations, or with a capacity request policy.
    pub fn uses_consumable_capacity(&self) -> bool {
        self.allow_multiple_allocations
            || self
                .capacity
                .values()
                .any(|capacity| capacity.request_policy.is_some())
    }
}

/// What a device uses up of one counter set while allocated.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CounterConsumption {
    /// The counter set's name.
    pub counter_set: String,
    /// Counter name → quantity consumed (`"10Gi"`).
    pub counters: BTreeMap<String, String>,
}

/// A capacity of a device (`capacity[name]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Capacity {
    /// The whole capacity, a quantity (`"40Gi"`).
    pub value: String,
    /// How requests may take part of it; only for a device with
    /// `allow_multiple_allocations`.
    pub request_policy: Option<CapacityPolicy>,
}

impl Capacity {
    /// A capacity of `value` with no request policy.
    pub fn new(value: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            request_policy: None,
        }
    }

    /// This capacity with a request policy (builder style).
    pub fn with_policy(mut self, policy: CapacityPolicy) -> Self {
        self.request_policy = Some(policy);
        self
    }
}

/// How a request takes part of a shared capacity (`requestPolicy`): at most
/// one of `valid_values` and `valid_range`, and a `default` that fits it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CapacityPolicy {
    /// What a request that names no amount takes.
    pub default: Option<String>,
    /// The amounts a request may take, ascending, at most 10.
    pub valid_values: Vec<String>,
    /// The range a request's amount must fall in.
    pub valid_range: Option<CapacityRange>,
}

/// A range of amounts: from `min`, up to `max`, in steps of `step`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CapacityRange {
    /// The smallest amount (a request for less gets this much).
    pub min: String,
    /// The largest amount, at most the capacity's value.
    pub max: Option<String>,
    /// Amounts are `min + n * step`.
    pub step: Option<String>,
}

/// The value of a device attribute: exactly one of the four kinds DRA knows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AttributeValue {
    /// A number.
    Int(i64),
    /// A true/false value.
    Bool(bool),
    /// A string of at most 64 characters.
    String(String),
    /// A semantic version (semver.org 2.0.0) of at most 64 characters.
    Version(String),
}

/// A device taint, as DRA's `DeviceTaint` without the server-set `timeAdded`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceTaint {
    /// A label name: `[prefix/]name`.
    pub key: String,
    /// A label value, possibly empty.
    pub value: String,
    /// What the taint does to claims that do not tolerate it.
    pub effect: TaintEffect,
}

/// The effects a device taint may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// No new allocation of the device to claims that do not tolerate it.
    NoSchedule,
    /// As `NoSchedule`, and pods using the device without tolerating it are evicted.
    NoExecute,
    /// Nothing: the taint only informs (Kubernetes 1.35 and later; a 1.34
    /// API server refuses it, see [`crate::SliceLimits::taint_effect_none`]).
    None,
}

impl TaintEffect {
    /// The effect as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
            TaintEffect::None => "None",
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`TaintEffect`] from anything but its API spelling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("taint effect {0:?} is none of NoSchedule, NoExecute and None")]
pub struct UnknownTaintEffect(pub String);

impl FromStr for TaintEffect {
    type Err = UnknownTaintEffect;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            "None" => Ok(TaintEffect::None),
            other => Err(UnknownTaintEffect(other.to_owned())),
        }
    }
}
