//! The Kubernetes API side of the DRA mode: publishes one node's devices as
//! `resource.k8s.io/v1` ResourceSlices and reads ResourceClaims, with kube-rs.
//!
//! It knows nothing of Wasm, sysfs or the host: it takes a plain device list
//! per (driver, node) and keeps the API server's slices equal to it.
//! Device IDs become DRA device names by `wdp_k8s_naming`'s rule (as do the
//! DNS, label and quantity checks); [`validate_pool`] finds what
//! the API server would reject (or its version could not hold) and leaves it
//! out; [`plan_pool`] cuts a pool's devices and counter sets into slices the
//! way the served version wants them (pure); [`SlicePublisher`] runs one task
//! per pool that learns the server's version, writes only when something
//! changed, at most one pass per write interval, re-creates wiped slices,
//! notices fields the server drops (feature gates off) and retries with
//! jittered backoff that honours `Retry-After`; [`client()`] and
//! [`get_claim`] reach the API server, and [`write_device_status`] reports
//! allocated devices' status on a claim (KEP-4817). What the host does with
//! the API server beside DRA (following its Node's label, posting events on
//! it) is the host's, on the [`Client`] made here.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod capacity;
mod claim_watch;
mod client;
mod counters;
mod device;
mod device_status;
mod error;
mod fit;
mod keys;
mod plan;
mod pool;
mod problem;
mod publisher;
mod retry_after;
mod status_checks;
mod validate;
mod version;

pub use capacity::MAX_CAPACITY_VALID_VALUES;
pub use claim_watch::{ClaimEvent, watch_claims};
pub use client::{client, get_claim, install_tls_provider};
pub use device::{
    AttributeValue, BindingConditions, Capacity, CapacityPolicy, CapacityRange, CounterConsumption,
    DeviceTaint, DraDevice, TaintEffect, UnknownTaintEffect,
};
pub use device_status::{
    MAX_DEVICE_STATUS_CONDITIONS, MAX_DEVICE_STATUS_DATA_LEN, MAX_HARDWARE_ADDRESS_LEN,
    MAX_INTERFACE_NAME_LEN, MAX_NETWORK_IPS, MAX_STATUS_ATTEMPTS, STATUS_REQUEST_TIMEOUT,
    StatusProblem, clear_device_status, merge_device_status, write_device_status,
};
pub use error::ApiError;
pub use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, NetworkDeviceData, ResourceClaim, ResourceSliceSpec,
};
pub use keys::{MAX_ATTRIBUTE_ID_LEN, qualified_attribute_key};
pub use kube::Client;
pub use plan::{
    MAX_DEVICES_PER_SLICE, MAX_DEVICES_PER_TAINTED_SLICE, PoolTarget, plan_pool, plan_slices,
};
pub use pool::{CounterSet, PoolContent};
pub use problem::DeviceProblem;
pub use publisher::{
    DEFAULT_MIN_WRITE_INTERVAL, MAX_RETRY_AFTER, PublishStatus, PublishedPool, PublisherHandle,
    SlicePublisher, WriteFence,
};
pub use validate::{
    MAX_ATTRIBUTE_VALUE_LEN, MAX_ATTRIBUTES_PER_DEVICE, MAX_TAINTS_PER_DEVICE, PoolCheck, validate,
    validate_pool,
};
pub use version::{ServerVersion, SliceLimits};
