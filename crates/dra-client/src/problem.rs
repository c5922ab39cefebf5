//! [`DeviceProblem`]: one thing the API server would reject, or the served
//! version could not hold, named by device (or counter set) and field.

use std::fmt;

/// One thing the API server would reject, naming the device and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProblem {
    /// The device's name; `None` for a problem of the driver, of a counter
    /// set (its field then starts `sharedCounters["name"]`) or of the pool.
    pub device: Option<String>,
    /// The field, in the API's path form (`attributes["gpu.example.com/model"]`,
    /// `taints[0].key`, `consumesCounters[0].counters["memory"]`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl DeviceProblem {
    /// A problem of the device `device`.
    pub(crate) fn of_device(device: &str, field: String, message: String) -> Self {
        Self {
            device: Some(device.to_owned()),
            field,
            message,
        }
    }

    /// A problem of the counter set `set`; `field` is relative to the set.
    pub(crate) fn of_counter_set(set: &str, field: &str, message: String) -> Self {
        Self {
            device: None,
            field: format!("sharedCounters[{set:?}]{field}"),
            message,
        }
    }
}

impl fmt::Display for DeviceProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.device {
            Some(device) => write!(f, "device {device:?}: {}: {}", self.field, self.message),
            None => write!(f, "{}: {}", self.field, self.message),
        }
    }
}
