//! The DRA driver: a resource whose config says `api = "dra"` served as a
//! Dynamic Resource Allocation kubelet plugin instead of through the
//! device-plugin API, driven by the same guests and the same
//! [`wdp_resource::Resource`] swap point.
//!
//! Map, one job per module: `devices` turns a device set into the DRA
//! devices (names, attributes, health taints) a ResourceSlice carries,
//! `standard_attributes` the `resource.kubernetes.io/` attributes among them;
//! `publish` keeps the driver's slices following the device set
//! ([`SliceSync`]), with `taint_fit` fitting a guest's taints to the API
//! server's version (the `None` effect, taints a device); `health` serves the kubelet's `DRAResourceHealth`
//! stream ([`HealthService`]); `checkpoint` is the on-disk record of
//! prepared claims, shared with a second instance during a rolling update,
//! and `shared_checkpoint` how concurrent claims read and write it (group
//! commit); `handover` decides which instance publishes; `prepare` holds
//! the per-claim prepare and unprepare decisions, `allocation` maps a
//! claim's results to this node's devices and partitions, `claim` names a
//! claim and one write of its device statuses, `in_flight` what claims are doing
//! right now, `claim_cdi` the CDI spec of one claim, and `recorded_spec`
//! writes a prepared claim's spec again from its record when a reboot
//! emptied the CDI folder; `device_metadata` the per-request device
//! metadata files (KEP-5304) a claim's containers get (their wire format
//! and their removal in child modules); `passthrough` binds a
//! `[passthrough]` resource's devices to another kernel driver on demand
//! (binding conditions, the claim watch, the prepare side, through
//! `wdp-passthrough`); `cleanup` unprepares at start what the API
//! server no longer has; `service` is the `DRAPlugin` gRPC side (v1 and
//! v1beta1); `api_port` is how a driver reaches the API server
//! ([`ApiPort`], implemented by the host over `wdp-dra-client`); `driver` runs one driver (sockets, registration, slice
//! publishing, health stream: [`DraDriver`]); `report` is what `check`
//! prints of a DRA resource ([`dra_report`]); [`metrics`] counts claims
//! and publishing.
//!
//! It does not parse the configuration, load guests or read hardware
//! (`wdp-resource` does), nor decide when a driver starts, stops or is
//! withdrawn (the host does). Its Kubernetes API calls go through
//! [`ApiPort`]; it takes only types from `wdp-dra-client` (and the slice
//! planning its publisher does).

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod allocation;
mod api_port;
mod checkpoint;
mod checkpoint_read;
mod checksum;
mod claim;
mod claim_cdi;
mod cleanup;
mod device_metadata;
mod devices;
mod draining;
mod driver;
mod error;
mod file_stamp;
mod handover;
mod health;
mod in_flight;
pub mod metrics;
mod passthrough;
mod prepare;
mod publish;
mod recorded_spec;
mod report;
mod service;
mod shared_checkpoint;
mod standard_attributes;
mod taint_fit;

pub use api_port::{ApiPort, ApiPortError};
pub use checkpoint_read::{CheckpointReadError, checkpointed_drivers, held_by_checkpoint};
pub use claim::{ClaimRef, StatusWrite};
pub use draining::{Draining, DrainingClaims};
pub use driver::{DraDriver, DriverPaths};
pub use error::DraError;
pub use health::HealthService;
pub use metrics::DraMetrics;
pub use passthrough::{
    BIND_FAILED_CONDITION, BOUND_CONDITION, BindFailure, PassthroughBinds, journal_path,
};
pub use publish::SliceSync;
pub use report::{DraReport, check_publishable, dra_report};
/// What [`DraDriver::publish_status`] reports, from the slice publisher.
pub use wdp_dra_client::PublishStatus;
