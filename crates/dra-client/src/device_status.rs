//! Writing the status of allocated devices on a ResourceClaim (KEP-4817).
//!
//! [`write_device_status`] reads the claim, refuses one whose UID is not the
//! one prepared (a claim deleted and made anew under the same name), checks
//! the entries against the API's rules (see [`crate::status_checks`]),
//! replaces this driver's and pool's entries in `status.devices` with them,
//! leaving every other driver's and pool's untouched ([`merge_device_status`]),
//! and writes through the `status` subresource with the resourceVersion
//! read. A conflict (someone else wrote the claim meanwhile) reads again and
//! retries, at most [`MAX_STATUS_ATTEMPTS`] times in all. Every request gives
//! up after [`STATUS_REQUEST_TIMEOUT`]. Nothing is written when the entries
//! are already there. [`clear_device_status`] removes this driver's and
//! pool's entries; a claim that is gone, or holds none of them, is fine.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, ResourceClaim};
use kube::api::PostParams;
use kube::{Api, Client};

use crate::error::ApiError;
use crate::status_checks::check_statuses;

pub use crate::status_checks::{
    MAX_DEVICE_STATUS_CONDITIONS, MAX_DEVICE_STATUS_DATA_LEN, MAX_HARDWARE_ADDRESS_LEN,
    MAX_INTERFACE_NAME_LEN, MAX_NETWORK_IPS, StatusProblem,
};

/// How many times a status write is tried when the claim keeps changing
/// under it (409 Conflict).
pub const MAX_STATUS_ATTEMPTS: usize = 5;
/// How long one request (read or write) may take, as for a claim read.
pub const STATUS_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `existing` status entries with those of `driver`'s `pool` replaced by
/// `statuses`: other drivers' and pools' entries keep their place and come
/// first; `None` when nothing is left.
pub fn merge_device_status(
    existing: Option<&[AllocatedDeviceStatus]>,
    driver: &str,
    pool: &str,
    statuses: Vec<AllocatedDeviceStatus>,
) -> Option<Vec<AllocatedDeviceStatus>> {
    let mut merged: Vec<AllocatedDeviceStatus> = existing
        .unwrap_or_default()
        .iter()
        .filter(|entry| !(entry.driver == driver && entry.pool == pool))
        .cloned()
        .collect();
    merged.extend(statuses);
    (!merged.is_empty()).then_some(merged)
}

/// Replaces the status entries of `driver`'s `pool` on the ResourceClaim
/// `namespace/name` with `statuses` (see the module docs). Refused, naming
/// the device and field, when an entry breaks the API's rules; refused when
/// the claim is gone or its UID is not `uid`.
pub async fn write_device_status(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
    driver: &str,
    pool: &str,
    statuses: Vec<AllocatedDeviceStatus>,
) -> Result<(), ApiError> {
    let claim = ClaimRef {
        namespace,
        name,
        uid,
    };
    update(client, &claim, driver, pool, statuses, false).await
}

/// Removes the status entries of `driver`'s `pool` from the ResourceClaim
/// `namespace/name` (an unprepared claim). A claim that is gone, has another
/// UID or holds no such entries is left as it is, without error.
pub async fn clear_device_status(
    client: &Client,
    namespace: &str,
    name: &str,
    uid: &str,
    driver: &str,
    pool: &str,
) -> Result<(), ApiError> {
    let claim = ClaimRef {
        namespace,
        name,
        uid,
    };
    update(client, &claim, driver, pool, Vec::new(), true).await
}

struct ClaimRef<'a> {
    namespace: &'a str,
    name: &'a str,
    uid: &'a str,
}

impl ClaimRef<'_> {
    fn describe(&self) -> String {
        format!("ResourceClaim {}/{}", self.namespace, self.name)
    }
}

/// Runs `request` for at most [`STATUS_REQUEST_TIMEOUT`].
async fn timed<T>(
    action: impl FnOnce() -> String,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, RequestFailure> {
    match tokio::time::timeout(STATUS_REQUEST_TIMEOUT, request).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(source)) => Err(RequestFailure::Answered(action(), source)),
        Err(_) => Err(RequestFailure::TimedOut(action())),
    }
}

enum RequestFailure {
    Answered(String, kube::Error),
    TimedOut(String),
}

impl RequestFailure {
    fn into_error(self) -> ApiError {
        match self {
            RequestFailure::Answered(action, source) => ApiError::request(action, source),
            RequestFailure::TimedOut(action) => ApiError::TimedOut {
                action,
                after: STATUS_REQUEST_TIMEOUT,
            },
        }
    }
}

async fn update(
    client: &Client,
    claim: &ClaimRef<'_>,
    driver: &str,
    pool: &str,
    statuses: Vec<AllocatedDeviceStatus>,
    clearing: bool,
) -> Result<(), ApiError> {
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), claim.namespace);
    let what = if clearing { "clearing" } else { "writing" };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let read = timed(
            || format!("reading {}", claim.describe()),
            api.get_opt(claim.name),
        )
        .await
        .map_err(RequestFailure::into_error)?;
        let mut current = match read {
            Some(current) => current,
            None if clearing => return Ok(()),
            None => {
                return Err(ApiError::ClaimGone {
                    claim: claim.describe(),
                });
            }
        };
        let found_uid = current.metadata.uid.clone().unwrap_or_default();
        if found_uid != claim.uid {
            if clearing {
                return Ok(());
            }
            return Err(ApiError::ClaimReplaced {
                claim: claim.describe(),
                expected: claim.uid.to_owned(),
                found: found_uid,
            });
        }
        let problems = check_statuses(&current, driver, pool, &statuses);
        if !problems.is_empty() {
            return Err(ApiError::InvalidDeviceStatus {
                claim: claim.describe(),
                driver: driver.to_owned(),
                problems,
            });
        }
        let status = current.status.get_or_insert_with(Default::default);
        let merged = merge_device_status(status.devices.as_deref(), driver, pool, statuses.clone());
        if merged == status.devices {
            return Ok(());
        }
        status.devices = merged;
        let written = timed(
            || {
                format!(
                    "{what} the device status of driver {driver} pool {pool} on {}",
                    claim.describe()
                )
            },
            api.replace_status(claim.name, &PostParams::default(), &current),
        )
        .await;
        match written {
            Ok(_) => return Ok(()),
            Err(RequestFailure::Answered(_, kube::Error::Api(status)))
                if clearing && status.is_not_found() =>
            {
                return Ok(());
            }
            Err(RequestFailure::Answered(action, kube::Error::Api(status)))
                if status.code == 409 && attempt < MAX_STATUS_ATTEMPTS =>
            {
                tracing::debug!(%action, attempt, "the claim changed meanwhile; reading it again");
            }
            Err(failure) => return Err(failure.into_error()),
        }
    }
}

#[cfg(test)]
#[path = "device_status_tests.rs"]
mod tests;
