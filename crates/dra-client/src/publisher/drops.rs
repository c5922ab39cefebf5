//! Fields the API server drops because a feature gate is off, and publishing
//! without them from then on.
//!
//! A server with `DRAPartitionableDevices` off answers a write without the
//! `sharedCounters` and `consumesCounters` sent; one with
//! `DRAConsumableCapacity` off without `allowMultipleAllocations` and the
//! capacities' `requestPolicy`. The publisher compares each slice it writes
//! with the server's answer ([`dropped_by`]); once a kind of field is found
//! dropped it publishes the pool [`without_dropped`] fields: whole devices
//! only (partitions left out, counters stripped), or devices without
//! sharing. The server then holds exactly what is planned, so nothing is
//! rewritten over and over.

use k8s_openapi::api::resource::v1::ResourceSliceSpec;

use crate::pool::PoolContent;

/// Which kinds of fields the server was found to drop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    /// `sharedCounters`/`consumesCounters` (DRAPartitionableDevices off).
    pub partitions: bool,
    /// `allowMultipleAllocations`/`requestPolicy` (DRAConsumableCapacity off).
    pub sharing: bool,
}

impl Dropped {
    /// What the server dropped of `sent` in its answer `stored`, added to `self`.
    pub(crate) fn dropped_by(self, sent: &ResourceSliceSpec, stored: &ResourceSliceSpec) -> Self {
        Self {
            partitions: self.partitions || (has_counters(sent) && !has_counters(stored)),
            sharing: self.sharing || (has_sharing(sent) && !has_sharing(stored)),
        }
    }
}

/// Whether `spec` has counter sets or devices consuming counters.
pub(crate) fn has_counters(spec: &ResourceSliceSpec) -> bool {
    spec.shared_counters
        .as_ref()
        .is_some_and(|sets| !sets.is_empty())
        || spec.devices.iter().flatten().any(|device| {
            device
                .consumes_counters
                .as_ref()
                .is_some_and(|consumptions| !consumptions.is_empty())
        })
}

/// Whether `spec` has a shared device or a capacity request policy.
pub(crate) fn has_sharing(spec: &ResourceSliceSpec) -> bool {
    spec.devices.iter().flatten().any(|device| {
        device.allow_multiple_allocations == Some(true)
            || device
                .capacity
                .iter()
                .flatten()
                .any(|(_, capacity)| capacity.request_policy.is_some())
    })
}

/// `content` without what the server was found to drop.
pub(crate) fn without_dropped(content: &PoolContent, dropped: Dropped) -> PoolContent {
    let mut content = content.clone();
    if dropped.partitions {
        content.counter_sets.clear();
        content
            .devices
            .retain(|device| device.partition_of.is_none());
        for device in &mut content.devices {
            device.consumes_counters.clear();
        }
    }
    if dropped.sharing {
        for device in &mut content.devices {
            device.allow_multiple_allocations = false;
            for capacity in device.capacity.values_mut() {
                capacity.request_policy = None;
            }
        }
    }
    content
}

#[cfg(test)]
#[path = "drops_tests.rs"]
mod tests;
