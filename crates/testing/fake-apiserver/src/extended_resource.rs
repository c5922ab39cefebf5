//! The claim the scheduler creates for a pod that asks for an extended
//! resource (`example.com/gpu: 1`) served by DRA (KEP-5004,
//! `DRAExtendedResource`; modelled on Kubernetes 1.36/1.37).
//!
//! The scheduler takes the DRA path for such a request on a node whose
//! `status.allocatable` has 0 of the resource (no device plugin offers
//! it) when a DeviceClass names the resource in `spec.extendedResourceName`;
//! the caller checks the node side (the kubelet stand-in's allocatable).
//! It then allocates devices of that class from the node's ResourceSlices,
//! never one another claim has allocated, and at PreBind writes a claim
//! named `<pod>-extended-resources-<suffix>`, annotated
//! `resource.kubernetes.io/extended-resource-claim: "true"`, owned by the
//! pod, with one request per container and resource
//! (`container-<i>-request-<j>`), its allocation and the pod in
//! `reservedFor`. The kubelet then prepares it like any claim.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};

/// The annotation that marks a scheduler-created extended-resource claim.
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";

/// One pod's request for an extended resource served by DRA.
#[derive(Clone, Debug)]
pub struct ExtendedResourceRequest {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's UID.
    pub pod_uid: String,
    /// The extended resource name the container asks for.
    pub resource: String,
    /// How many devices.
    pub count: usize,
    /// The DeviceClass whose `extendedResourceName` is `resource`.
    pub device_class: String,
    /// The DRA driver of that class.
    pub driver: String,
    /// The node the pod goes to.
    pub node: String,
}

/// The devices `claims` have allocated, as `(driver, pool, device)`.
fn allocated(claims: &[ResourceClaim]) -> BTreeSet<(String, String, String)> {
    claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| (r.driver.clone(), r.pool.clone(), r.device.clone()))
        .collect()
}

/// The claim the scheduler writes for `request`, allocating the first free
/// devices of `slices` (the node's, of the request's driver, in slice
/// and device order); an error saying what is missing when there are not
/// enough. `suffix` makes the name unique.
pub(crate) fn claim_for(
    request: &ExtendedResourceRequest,
    slices: &[ResourceSlice],
    claims: &[ResourceClaim],
    suffix: u64,
) -> Result<ResourceClaim, String> {
    let taken = allocated(claims);
    let free: Vec<(String, String)> = slices
        .iter()
        .flat_map(|slice| {
            let pool = slice.spec.pool.name.clone();
            slice
                .spec
                .devices
                .iter()
                .flatten()
                .map(move |d| (pool.clone(), d.name.clone()))
        })
        .filter(|(pool, device)| {
            !taken.contains(&(request.driver.clone(), pool.clone(), device.clone()))
        })
        .collect();
    if free.len() < request.count {
        return Err(format!(
            "0/1 nodes are available: {} free device(s) of {} on {} for {} {} ({} requested)",
            free.len(),
            request.driver,
            request.node,
            request.resource,
            request.device_class,
            request.count
        ));
    }
    let request_name = "container-0-request-0";
    let results: Vec<serde_json::Value> = free[..request.count]
        .iter()
        .map(|(pool, device)| {
            serde_json::json!({
                "request": request_name, "driver": request.driver, "pool": pool, "device": device
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": format!("{}-extended-resources-{suffix:05}", request.pod),
            "namespace": request.namespace,
            "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": request.pod,
                "uid": request.pod_uid, "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {"devices": {"requests": [{
            "name": request_name,
            "exactly": {
                "deviceClassName": request.device_class,
                "allocationMode": "ExactCount",
                "count": request.count
            }
        }]}},
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{
                    "key": "metadata.name", "operator": "In", "values": [request.node]
                }]}]}
            },
            "reservedFor": [{"resource": "pods", "name": request.pod, "uid": request.pod_uid}]
        }
    }))
    .map_err(|error| format!("the claim does not parse: {error}"))
}
