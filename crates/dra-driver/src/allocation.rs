//! One claim's allocation results as this node's devices: which advertised
//! device (or partition of one) each result names ([`Picked::of`]), what
//! the guests see of the claim and its devices ([`claim_info`],
//! [`Picked::claim_device`], [`recorded_claim_info`]), and a guest's
//! device status as the API's ([`api_status`]).

use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequestAllocationResult, NetworkDeviceData, ResourceClaim,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use wdp_policy::ClaimInfo;
use wdp_policy::types::{ClaimDevice, DeviceStatus};
use wdp_resource::{AdvertisedDevice, DeviceSet};

use crate::checkpoint::{PreparedClaim, PreparedDevice};
use crate::claim::ClaimRef;
use crate::claim_cdi;

/// One allocation result mapped to this node's devices.
#[derive(Debug)]
pub(crate) struct Picked<'a> {
    /// The advertised device whose nodes the container gets (a
    /// partition's parent).
    pub(crate) device: &'a AdvertisedDevice,
    /// The ID the result names: the device's, or the partition's.
    pub(crate) id: String,
    /// Whether `id` is a partition.
    pub(crate) partition: bool,
    /// Whether the device allows multiple allocations.
    pub(crate) shared: bool,
    /// The result.
    pub(crate) result: &'a DeviceRequestAllocationResult,
}

impl<'a> Picked<'a> {
    /// The device of `set` that `result` names — an advertised device, or
    /// the parent of a partition — checked to be known and healthy. The
    /// error names the claim, the device and why.
    pub(crate) fn of(
        claim: &ClaimRef,
        result: &'a DeviceRequestAllocationResult,
        set: &'a DeviceSet,
        resource: &str,
    ) -> Result<Self, String> {
        let unknown = || {
            format!(
                "claim {claim}: device {:?} (request {:?}) is not among the devices of {resource} on this node",
                result.device, result.request
            )
        };
        let extras = set.dra();
        // A partition is published under its ID; a device under the
        // reversible name of its ID.
        let (id, device, partition) = match extras.partition(&result.device) {
            None => {
                let id = wdp_k8s_naming::device_id(&result.device).map_err(|_| unknown())?;
                let device = set.get(&id).ok_or_else(unknown)?;
                (id, device, false)
            }
            Some(partition) => {
                let device = advertised_device(set, &partition.parent).ok_or_else(unknown)?;
                (result.device.clone(), device, true)
            }
        };
        if !device.healthy {
            return Err(format!(
                "claim {claim}: device {:?} (ID {:?}) is unhealthy: {}",
                result.device,
                device.id(),
                device.reason
            ));
        }
        if set.withholding().withholds(&device.device.device_id) {
            return Err(format!(
                "claim {claim}: device {:?} (ID {:?}) is withheld: {}",
                result.device,
                device.id(),
                set.withholding().reason
            ));
        }
        Ok(Self {
            device,
            shared: !partition && extras.allows_multiple_allocations(&device.device.device_id),
            id,
            partition,
            result,
        })
    }

    /// Whether this allocation holds its device (or partition) alone.
    pub(crate) fn exclusive(&self) -> bool {
        self.result.admin_access != Some(true) && !self.shared
    }

    /// The device as the `claim` import and the prepare guests see it;
    /// capacity names as the guest declared them: published unqualified,
    /// and a `<driver>/` prefix (a release before names were published as
    /// written) dropped (`gpu.example.com/memory` → `memory`).
    pub(crate) fn claim_device(&self, driver: &str) -> ClaimDevice {
        ClaimDevice {
            id: self.id.clone(),
            device_id: self.device.device.device_id.clone(),
            partition: self.partition,
            request: self.result.request.clone(),
            admin_access: self.result.admin_access == Some(true),
            consumed_capacity: self
                .result
                .consumed_capacity
                .iter()
                .flatten()
                .map(|(name, amount)| {
                    let name = name
                        .strip_prefix(driver)
                        .and_then(|rest| rest.strip_prefix('/'))
                        .unwrap_or(name);
                    (name.to_owned(), amount.0.clone())
                })
                .collect(),
            share_id: self.result.share_id.clone(),
        }
    }
}

/// The advertised device of `set` that `id` names: its advertised ID, or
/// its hardware device ID (as a partition names its parent).
pub(crate) fn advertised_device<'a>(set: &'a DeviceSet, id: &str) -> Option<&'a AdvertisedDevice> {
    set.get(id)
        .or_else(|| set.devices().iter().find(|d| d.device.device_id == id))
}

/// What the guests see of a recorded claim at unprepare: its requests and
/// devices as recorded (the claim may be gone from the API server, so its
/// configuration is not read again).
pub(crate) fn recorded_claim_info(claim: &ClaimRef, record: &PreparedClaim) -> ClaimInfo {
    let devices: Vec<ClaimDevice> = record.devices.iter().map(recorded_claim_device).collect();
    let mut requests: Vec<String> = Vec::new();
    for device in &devices {
        if !requests.contains(&device.request) {
            requests.push(device.request.clone());
        }
    }
    ClaimInfo {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        uid: claim.uid.clone(),
        requests,
        configs: Vec::new(),
        devices,
    }
}

/// A recorded device as the `dra-unprepare` guest sees it.
fn recorded_claim_device(device: &PreparedDevice) -> ClaimDevice {
    ClaimDevice {
        id: device.device_id.clone(),
        device_id: device
            .partition_of
            .clone()
            .unwrap_or_else(|| device.device_id.clone()),
        partition: device.partition_of.is_some(),
        request: device.request_names.first().cloned().unwrap_or_default(),
        admin_access: device.admin_access,
        consumed_capacity: device.consumed_capacity.clone(),
        share_id: device.share_id.clone(),
    }
}

/// A guest's device status as the API's, for device `name` of `pool`.
pub(crate) fn api_status(
    driver: &str,
    pool: &str,
    name: &str,
    share_id: Option<String>,
    status: &DeviceStatus,
) -> AllocatedDeviceStatus {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    AllocatedDeviceStatus {
        driver: driver.to_owned(),
        pool: pool.to_owned(),
        device: name.to_owned(),
        share_id,
        conditions: (!status.conditions.is_empty()).then(|| {
            status
                .conditions
                .iter()
                .map(|c| Condition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: now.clone(),
                    observed_generation: None,
                })
                .collect()
        }),
        data: status
            .data
            .as_deref()
            .and_then(|d| serde_json::from_str(d).ok())
            .map(RawExtension),
        network_data: status.network.as_ref().map(|n| NetworkDeviceData {
            interface_name: (!n.interface_name.is_empty()).then(|| n.interface_name.clone()),
            ips: (!n.ips.is_empty()).then(|| n.ips.clone()),
            hardware_address: (!n.hardware_address.is_empty()).then(|| n.hardware_address.clone()),
        }),
    }
}

/// What the guests see of `object` through the `claim` import: the
/// requests of this driver's results, and the parameters of every opaque
/// configuration for this driver that applies to one of them (a
/// configuration naming no requests applies to all), in allocation order.
pub fn claim_info(
    claim: &ClaimRef,
    driver: &str,
    object: &ResourceClaim,
    results: &[DeviceRequestAllocationResult],
    devices: Vec<ClaimDevice>,
) -> ClaimInfo {
    let mut requests: Vec<String> = Vec::new();
    for result in results {
        if !requests.contains(&result.request) {
            requests.push(result.request.clone());
        }
    }
    let configs = object
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .filter(|config| {
            config
                .requests
                .as_ref()
                .is_none_or(|named| named.is_empty() || named.iter().any(|r| requests.contains(r)))
        })
        .filter_map(|config| config.opaque.as_ref())
        .filter(|opaque| opaque.driver == driver)
        .map(|opaque| serde_json::to_string(&opaque.parameters.0).unwrap_or_default())
        .collect();
    ClaimInfo {
        namespace: claim.namespace.clone(),
        name: claim.name.clone(),
        uid: claim.uid.clone(),
        requests,
        configs,
        devices,
    }
}

/// What the checkpoint records of each picked device, as the kubelet is
/// answered: the claim's own CDI device per device, and the CDI devices
/// the allocate answer names itself (`answer_cdi`) with the first.
pub(crate) fn prepared_devices(
    driver: &str,
    resource: &str,
    uid: &str,
    picked: &[Picked<'_>],
    mut answer_cdi: Vec<String>,
) -> Vec<PreparedDevice> {
    picked
        .iter()
        .map(|pick| {
            let mut cdi_device_ids = vec![format!(
                "{resource}={}",
                claim_cdi::cdi_device_name(uid, &pick.result.device)
            )];
            cdi_device_ids.append(&mut answer_cdi);
            PreparedDevice {
                request_names: vec![pick.result.request.clone()],
                pool_name: pick.result.pool.clone(),
                device_name: pick.result.device.clone(),
                device_id: pick.id.clone(),
                partition_of: pick.partition.then(|| pick.device.device.device_id.clone()),
                consumed_capacity: pick.claim_device(driver).consumed_capacity,
                shared: pick.shared,
                cdi_device_ids,
                share_id: pick.result.share_id.clone(),
                admin_access: pick.result.admin_access == Some(true),
                unknown: Default::default(),
            }
        })
        .collect()
}

/// The statuses the `dra-prepare` guest reported for picked devices, as
/// the claim's `status.devices` entries.
pub(crate) fn api_statuses(
    driver: &str,
    picked: &[Picked<'_>],
    statuses: &[DeviceStatus],
) -> Vec<AllocatedDeviceStatus> {
    statuses
        .iter()
        .filter_map(|status| {
            let pick = picked.iter().find(|p| p.id == status.id)?;
            Some(api_status(
                driver,
                &pick.result.pool,
                &pick.result.device,
                pick.result.share_id.clone(),
                status,
            ))
        })
        .collect()
}

/// The devices a claim's CDI spec names: each picked device once, under
/// its published name (a partition's), on the advertised device whose
/// nodes it gets.
pub(crate) fn named_devices<'a>(picked: &[Picked<'a>]) -> Vec<(&'a AdvertisedDevice, String)> {
    let mut named: Vec<(&AdvertisedDevice, String)> = Vec::new();
    for pick in picked {
        if !named.iter().any(|(_, n)| *n == pick.result.device) {
            named.push((pick.device, pick.result.device.clone()));
        }
    }
    named
}
