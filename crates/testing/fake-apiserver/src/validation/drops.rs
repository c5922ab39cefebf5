//! Fields a disabled DRA feature gate drops from a written ResourceSlice, as the real server's
//! `dropDisabledFields` does before validation: silently, and only when the stored object does
//! not already use the feature (an update of a slice that uses it keeps the fields, so that
//! turning a gate off never strips data written while it was on).
//!
//! - DRADeviceTaints: `devices[].taints`.
//! - DRAPartitionableDevices: `sharedCounters`, `perDeviceNodeSelection`, and the devices'
//!   `consumesCounters`, `nodeName`, `nodeSelector` and `allNodes`.
//! - DRAConsumableCapacity: `devices[].allowMultipleAllocations` and
//!   `devices[].capacity[*].requestPolicy`.

use k8s_openapi::api::resource::v1::{ResourceSlice, ResourceSliceSpec};

use crate::admission::DisabledGates;

/// Drops from `slice` the fields of the gates in `disabled` that `old` does not use.
pub(crate) fn drop_disabled_fields(
    slice: &mut ResourceSlice,
    old: Option<&ResourceSlice>,
    disabled: DisabledGates,
) {
    let old = old.map(|o| &o.spec);
    let spec = &mut slice.spec;
    if disabled.device_taints && !old.is_some_and(uses_taints) {
        for device in spec.devices.iter_mut().flatten() {
            device.taints = None;
        }
    }
    if disabled.partitionable_devices && !old.is_some_and(uses_partitions) {
        spec.shared_counters = None;
        spec.per_device_node_selection = None;
        for device in spec.devices.iter_mut().flatten() {
            device.consumes_counters = None;
            device.node_name = None;
            device.node_selector = None;
            device.all_nodes = None;
        }
    }
    if disabled.consumable_capacity && !old.is_some_and(uses_consumable_capacity) {
        for device in spec.devices.iter_mut().flatten() {
            device.allow_multiple_allocations = None;
            for capacity in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
                capacity.request_policy = None;
            }
        }
    }
}

fn uses_taints(spec: &ResourceSliceSpec) -> bool {
    spec.devices
        .iter()
        .flatten()
        .any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
}

fn uses_partitions(spec: &ResourceSliceSpec) -> bool {
    spec.shared_counters.as_ref().is_some_and(|s| !s.is_empty())
        || spec.per_device_node_selection.is_some()
        || spec.devices.iter().flatten().any(|d| {
            d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty())
                || d.node_name.is_some()
                || d.node_selector.is_some()
                || d.all_nodes.is_some()
        })
}

fn uses_consumable_capacity(spec: &ResourceSliceSpec) -> bool {
    spec.devices.iter().flatten().any(|d| {
        d.allow_multiple_allocations.is_some()
            || d.capacity
                .iter()
                .flat_map(|c| c.values())
                .any(|c| c.request_policy.is_some())
    })
}
