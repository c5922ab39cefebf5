//! The devices this crate publishes, in plain Rust terms (no Kubernetes types).
//!
//! The host fills these from its discovery and health results; [`crate::plan`]
//! turns them into `resource.k8s.io/v1` ResourceSlice content.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One device as published in a ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraDevice {
    /// The DRA device name, a DNS label (see [`crate::naming::device_name`]).
    pub name: String,
    /// Attributes by key. A key without a `domain/` prefix is qualified with
    /// the driver name when written (`model` → `gpu.example.com/model`); a key
    /// such as `resource.kubernetes.io/numaNode` is kept as given.
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Taints: an unhealthy device is tainted rather than dropped, so the
    /// scheduler stops placing new claims on it.
    pub taints: Vec<DeviceTaint>,
}

impl DraDevice {
    /// A device with this name and no attributes or taints.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            attributes: BTreeMap::new(),
            taints: Vec::new(),
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
}

impl TaintEffect {
    /// The effect as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::NoExecute => "NoExecute",
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
#[error("taint effect {0:?} is neither NoSchedule nor NoExecute")]
pub struct UnknownTaintEffect(pub String);

impl FromStr for TaintEffect {
    type Err = UnknownTaintEffect;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "NoSchedule" => Ok(TaintEffect::NoSchedule),
            "NoExecute" => Ok(TaintEffect::NoExecute),
            other => Err(UnknownTaintEffect(other.to_owned())),
        }
    }
}
