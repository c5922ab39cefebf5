//! The Kubernetes API side of the DRA mode: publishes one node's devices as
//! `resource.k8s.io/v1` ResourceSlices and reads ResourceClaims, with kube-rs.
//!
//! It knows nothing of Wasm, sysfs or the host: it takes a plain device list
//! per (driver, node) and keeps the API server's slices equal to it.
//! [`naming`] maps device IDs to DRA device names; [`validate()`] finds what
//! the API server would reject; [`plan_slices`] cuts a device list into slices
//! (pure); [`SlicePublisher`] runs one task per pool that writes only when
//! something changed, at most one pass per write interval, re-creates wiped
//! slices, and retries with jittered backoff that honours `Retry-After`;
//! [`client()`] and [`get_claim`] reach the API server.

#![warn(missing_docs)]

mod client;
mod device;
mod error;
pub mod naming;
mod plan;
mod publisher;
mod retry_after;
mod validate;

pub use client::{client, get_claim, install_tls_provider};
pub use device::{AttributeValue, DeviceTaint, DraDevice, TaintEffect, UnknownTaintEffect};
pub use error::ApiError;
pub use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSliceSpec};
pub use naming::NameError;
pub use plan::{
    MAX_DEVICES_PER_SLICE, MAX_DEVICES_PER_TAINTED_SLICE, PoolTarget, plan_slices,
    qualified_attribute_key,
};
pub use publisher::{
    DEFAULT_MIN_WRITE_INTERVAL, MAX_RETRY_AFTER, PublishStatus, PublishedPool, PublisherHandle,
    SlicePublisher,
};
pub use validate::{
    DeviceProblem, MAX_ATTRIBUTE_ID_LEN, MAX_ATTRIBUTE_VALUE_LEN, MAX_ATTRIBUTES_PER_DEVICE,
    MAX_TAINTS_PER_DEVICE, validate,
};
