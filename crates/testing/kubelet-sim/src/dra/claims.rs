//! The kubelet's `NodePrepareResources` / `NodeUnprepareResources` calls,
//! in `v1` or `v1beta1` by the service chosen at registration, converted
//! to and from one neutral result type, under the kubelet's deadline and
//! with its checks: an entry for a claim that was not asked for fails the
//! call, and a claim missing from the answer is an error for that claim
//! (the kubelet would ask again).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tonic::Request;
use tonic::transport::Channel;
use wdp_kubelet_api::dra::{v1, v1beta1};

use crate::error::SimError;

const PREPARE: &str = "NodePrepareResources";
const UNPREPARE: &str = "NodeUnprepareResources";

/// One ResourceClaim of a pod, as the kubelet names it to the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRef {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's UID, the key of the driver's answer.
    pub uid: String,
    /// The claim's name.
    pub name: String,
}

impl ClaimRef {
    /// A claim reference from its namespace, name and UID.
    pub fn new(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            uid: uid.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// One device the driver prepared for a claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreparedDevice {
    /// The claim's requests the device serves (empty: all of them).
    pub request_names: Vec<String>,
    /// The pool holding the device.
    pub pool_name: String,
    /// The device's name in the pool.
    pub device_name: String,
    /// The CDI devices the container runtime is to inject.
    pub cdi_device_ids: Vec<String>,
    /// The share ID (`v1` only; `None` over `v1beta1`).
    pub share_id: Option<String>,
}

/// The driver's answer to `NodePrepareResources`, per claim UID: the
/// prepared devices, or why the claim was not prepared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrepareOutcome {
    /// The service that was called, e.g. `v1.DRAPlugin`.
    pub service: String,
    /// Per claim UID asked for: the devices, or the error (the driver's,
    /// or the kubelet's for a claim missing from the answer).
    pub claims: BTreeMap<String, Result<Vec<PreparedDevice>, String>>,
    /// Round-trip time of the call.
    pub elapsed: Duration,
}

/// The driver's answer to `NodeUnprepareResources`, per claim UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnprepareOutcome {
    /// The service that was called, e.g. `v1.DRAPlugin`.
    pub service: String,
    /// Per claim UID asked for: done, or the error (the driver's, or the
    /// kubelet's for a claim missing from the answer).
    pub claims: BTreeMap<String, Result<(), String>>,
    /// Round-trip time of the call.
    pub elapsed: Duration,
}

fn unsupported(service: &str) -> SimError {
    SimError::BadResponse {
        rpc: PREPARE,
        problem: format!("the simulated kubelet cannot call service {service}"),
    }
}

/// Runs one call under the kubelet's deadline: sent as `grpc-timeout`, and
/// the call abandoned when it passes, as a cancelled Go context does
/// ([`SimError::Timeout`]).
async fn with_deadline<T>(
    rpc: &'static str,
    driver_call: impl Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    limit: Duration,
) -> Result<T, SimError> {
    let started = Instant::now();
    let timed_out = || SimError::Timeout(limit, format!("{rpc} to answer"));
    match tokio::time::timeout(limit, driver_call).await {
        Err(_) => Err(timed_out()),
        // tonic ends a call whose grpc-timeout passed with `Cancelled`;
        // either way the deadline is what ended it.
        Ok(Err(_)) if started.elapsed() >= limit => Err(timed_out()),
        Ok(Err(status)) => Err(SimError::rpc(rpc, status)),
        Ok(Ok(response)) => Ok(response.into_inner()),
    }
}

fn request<T>(message: T, limit: Duration) -> Request<T> {
    let mut request = Request::new(message);
    request.set_timeout(limit);
    request
}

/// The kubelet's checks on an answer: every key was asked for, and every
/// claim asked for has an entry.
fn per_claim<E, T>(
    rpc: &'static str,
    claims: &[ClaimRef],
    mut answer: HashMap<String, E>,
    convert: impl Fn(E) -> Result<T, String>,
) -> Result<BTreeMap<String, Result<T, String>>, SimError> {
    if let Some(unknown) = answer
        .keys()
        .find(|uid| !claims.iter().any(|c| &c.uid == *uid))
    {
        return Err(SimError::BadResponse {
            rpc,
            problem: format!("returned result for unknown claim UID {unknown}"),
        });
    }
    Ok(claims
        .iter()
        .map(|claim| {
            let result = match answer.remove(&claim.uid) {
                Some(entry) => convert(entry),
                None => Err(format!(
                    "claim {}/{} (UID {}) is missing from the {rpc} answer; the kubelet would call again",
                    claim.namespace, claim.name, claim.uid
                )),
            };
            (claim.uid.clone(), result)
        })
        .collect())
}

fn driver_error(error: String) -> Result<(), String> {
    if error.is_empty() { Ok(()) } else { Err(error) }
}

/// `NodePrepareResources` for `claims` with `service` on `channel`.
pub(crate) async fn prepare(
    channel: Channel,
    service: &str,
    claims: &[ClaimRef],
    limit: Duration,
) -> Result<PrepareOutcome, SimError> {
    let started = Instant::now();
    let outcome = if service == v1::SERVICE {
        let message = v1::NodePrepareResourcesRequest {
            claims: claims.iter().map(to_v1).collect(),
        };
        let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);
        let answer = with_deadline(
            PREPARE,
            client.node_prepare_resources(request(message, limit)),
            limit,
        )
        .await?;
        per_claim(PREPARE, claims, answer.claims, |entry| {
            driver_error(entry.error)?;
            Ok(entry.devices.into_iter().map(from_v1).collect())
        })?
    } else if service == v1beta1::SERVICE {
        let message = v1beta1::NodePrepareResourcesRequest {
            claims: claims.iter().map(to_v1beta1).collect(),
        };
        let mut client = v1beta1::dra_plugin_client::DraPluginClient::new(channel);
        let answer = with_deadline(
            PREPARE,
            client.node_prepare_resources(request(message, limit)),
            limit,
        )
        .await?;
        per_claim(PREPARE, claims, answer.claims, |entry| {
            driver_error(entry.error)?;
            Ok(entry.devices.into_iter().map(from_v1beta1).collect())
        })?
    } else {
        return Err(unsupported(service));
    };
    Ok(PrepareOutcome {
        service: service.to_owned(),
        claims: outcome,
        elapsed: started.elapsed(),
    })
}

/// `NodeUnprepareResources` for `claims` with `service` on `channel`.
pub(crate) async fn unprepare(
    channel: Channel,
    service: &str,
    claims: &[ClaimRef],
    limit: Duration,
) -> Result<UnprepareOutcome, SimError> {
    let started = Instant::now();
    let outcome = if service == v1::SERVICE {
        let message = v1::NodeUnprepareResourcesRequest {
            claims: claims.iter().map(to_v1).collect(),
        };
        let mut client = v1::dra_plugin_client::DraPluginClient::new(channel);
        let answer = with_deadline(
            UNPREPARE,
            client.node_unprepare_resources(request(message, limit)),
            limit,
        )
        .await?;
        per_claim(UNPREPARE, claims, answer.claims, |entry| {
            driver_error(entry.error)
        })?
    } else if service == v1beta1::SERVICE {
        let message = v1beta1::NodeUnprepareResourcesRequest {
            claims: claims.iter().map(to_v1beta1).collect(),
        };
        let mut client = v1beta1::dra_plugin_client::DraPluginClient::new(channel);
        let answer = with_deadline(
            UNPREPARE,
            client.node_unprepare_resources(request(message, limit)),
            limit,
        )
        .await?;
        per_claim(UNPREPARE, claims, answer.claims, |entry| {
            driver_error(entry.error)
        })?
    } else {
        return Err(unsupported(service));
    };
    Ok(UnprepareOutcome {
        service: service.to_owned(),
        claims: outcome,
        elapsed: started.elapsed(),
    })
}

fn to_v1(claim: &ClaimRef) -> v1::Claim {
    v1::Claim {
        namespace: claim.namespace.clone(),
        uid: claim.uid.clone(),
        name: claim.name.clone(),
    }
}

fn to_v1beta1(claim: &ClaimRef) -> v1beta1::Claim {
    v1beta1::Claim {
        namespace: claim.namespace.clone(),
        uid: claim.uid.clone(),
        name: claim.name.clone(),
    }
}

fn from_v1(device: v1::Device) -> PreparedDevice {
    PreparedDevice {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
        share_id: device.share_id,
    }
}

fn from_v1beta1(device: v1beta1::Device) -> PreparedDevice {
    PreparedDevice {
        request_names: device.request_names,
        pool_name: device.pool_name,
        device_name: device.device_name,
        cdi_device_ids: device.cdi_device_ids,
        share_id: None,
    }
}
