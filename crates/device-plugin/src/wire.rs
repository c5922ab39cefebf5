//! The device-plugin API's wire terms for what [`wdp_resource`] decides:
//! a [`ContainerGrant`] as the kubelet's `ContainerAllocateResponse`, an
//! [`AdmissionError`] as the gRPC status an RPC fails with (naming the
//! guest and hook at fault in its metadata, which [`blamed_guest`] reads
//! back for the RPC's log line), a device set as a `ListAndWatch`
//! message and a resource's options as `DevicePluginOptions`.

use tonic::Status;
use wdp_kubelet_api::v1beta1::{
    self, CdiDevice, ContainerAllocateResponse, DevicePluginOptions, DeviceSpec,
    ListAndWatchResponse, Mount, NumaNode, TopologyInfo,
};
use wdp_resource::Resource;
use wdp_resource::{AdmissionError, ContainerGrant};
use wdp_resource::{AdvertisedDevice, DeviceSet};

/// Metadata key of a refused RPC's status naming the guest at fault.
const GUEST_METADATA: &str = "wdp-guest";
/// Metadata key of a refused RPC's status naming the hook at fault.
const HOOK_METADATA: &str = "wdp-hook";

/// The kubelet's `ContainerAllocateResponse` for a container grant.
pub fn kubelet_response(grant: ContainerGrant) -> ContainerAllocateResponse {
    ContainerAllocateResponse {
        envs: grant.envs.into_iter().collect(),
        mounts: grant
            .mounts
            .into_iter()
            .map(|m| Mount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: grant
            .devices
            .into_iter()
            .map(|d| DeviceSpec {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: grant.annotations.into_iter().collect(),
        cdi_devices: grant
            .cdi_devices
            .into_iter()
            .map(|name| CdiDevice { name })
            .collect(),
    }
}

/// The gRPC status a kubelet RPC fails with for `error`: `InvalidArgument`
/// for a request that cannot be served, `ResourceExhausted` for an answer
/// above the message limit, `FailedPrecondition` for a device node gone or
/// a guest's refusal, `DeadlineExceeded` for a guest out of time and
/// `Internal` for any other guest failure. The guest and hook at fault go
/// in its metadata.
pub fn kubelet_status(error: AdmissionError) -> Status {
    let message = error.to_string();
    let mut status = match &error {
        AdmissionError::InvalidRequest(_) => Status::invalid_argument(message),
        AdmissionError::AnswerTooLarge(_) => Status::resource_exhausted(message),
        AdmissionError::NodeGone { .. }
        | AdmissionError::PreStartRefused(_)
        | AdmissionError::DraAction { .. } => Status::failed_precondition(message),
        AdmissionError::GuestFailed(_) if error.is_timeout() => Status::deadline_exceeded(message),
        AdmissionError::GuestFailed(_) => Status::internal(message),
    };
    if let Some((guest, hook)) = error.blamed() {
        let metadata = status.metadata_mut();
        if let Ok(value) = guest.parse() {
            metadata.insert(GUEST_METADATA, value);
        }
        if let Ok(value) = hook.interface().parse() {
            metadata.insert(HOOK_METADATA, value);
        }
    }
    status
}

/// The guest and hook a refused RPC's `status` blames, when a guest's
/// failure or refusal caused it ([`kubelet_status`]), so the RPC's log
/// line carries `guest` and `hook` fields as every guest event does.
pub fn blamed_guest(status: &Status) -> Option<(&str, &str)> {
    let metadata = status.metadata();
    let guest = metadata.get(GUEST_METADATA)?.to_str().ok()?;
    let hook = metadata.get(HOOK_METADATA)?.to_str().ok()?;
    Some((guest, hook))
}

/// The `ListAndWatch` message for a device set: each advertised ID with
/// its health word (`Unhealthy` too when withheld, so the kubelet neither
/// counts it allocatable nor picks it) and NUMA nodes.
pub fn device_list(set: &DeviceSet) -> ListAndWatchResponse {
    ListAndWatchResponse {
        devices: set
            .devices()
            .iter()
            .map(|d| kubelet_device(d, set.offers(d)))
            .collect(),
    }
}

/// The `ListAndWatch` message that offers nothing: every device of `set`
/// `Unhealthy`, for a server that hands its resource over to DRA and stays
/// registered only for the containers that hold devices already.
pub fn retiring_device_list(set: &DeviceSet) -> ListAndWatchResponse {
    ListAndWatchResponse {
        devices: set
            .devices()
            .iter()
            .map(|d| kubelet_device(d, false))
            .collect(),
    }
}

fn kubelet_device(d: &AdvertisedDevice, offered: bool) -> v1beta1::Device {
    v1beta1::Device {
        id: d.id().to_owned(),
        health: if offered {
            v1beta1::HEALTHY
        } else {
            v1beta1::UNHEALTHY
        }
        .to_owned(),
        // No topology when the NUMA nodes are unknown.
        topology: (!d.device.numa_nodes.is_empty()).then(|| TopologyInfo {
            nodes: d
                .device
                .numa_nodes
                .iter()
                .map(|&id| NumaNode { id })
                .collect(),
        }),
    }
}

/// The options a resource registers with the kubelet, as of now (whether
/// `GetPreferredAllocation` is offered may follow the devices:
/// [`Resource::offers_preferred_allocation`]).
pub fn plugin_options(resource: &Resource) -> DevicePluginOptions {
    DevicePluginOptions {
        pre_start_required: resource.spec().config.pre_start_required,
        get_preferred_allocation_available: resource.offers_preferred_allocation(),
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
