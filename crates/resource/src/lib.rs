//! The resource model both kubelet protocols share: everything about one
//! configured resource that does not depend on how the kubelet reaches it.
//! It loads a resource's guests, turns hardware into a device set through
//! discovery and health (built-in policy or a guest), holds the
//! per-resource swap point, decides each admission (preferred allocation,
//! allocate, pre-start), writes its CDI spec and counts what happens in
//! Prometheus metrics.
//!
//! It serves no socket, registers nothing, talks to no API server and
//! speaks no protocol's wire: an admission answers a [`ContainerGrant`] or
//! an [`AdmissionError`], which the device-plugin transport
//! (`wdp-device-plugin`) turns into gRPC messages and statuses and the DRA
//! driver (`wdp-dra-driver`) into a claim's CDI spec and error, each on top
//! of [`Resource`]; the host (`wdp-host`) supervises and reloads. Its
//! configuration is `wdp-config`'s model, its CDI files are written through
//! `wdp-cdi`; it reads hardware only through `wdp-hardware`, runs guests
//! only through `wdp-policy`, whose types (devices, verdicts, container
//! responses) are its device model too, and judges Kubernetes names with
//! `wdp-k8s-naming`.
//!
//! The modules (all private; what other crates use is re-exported here),
//! in the order data flows: `loading` and `spec` put a resource's guests in
//! service ([`load_specs`], [`ResourceSpec`]); `pipeline` turns hardware
//! (`scan`) into a `device_set` ([`DeviceSet`]) through discovery and
//! health (`builtin` policy or a guest, through the one call path of
//! `guest_call` with the imports of `services`, answers checked by
//! `validate`, with `companions` added and administrative nodes refused by
//! `admin_grants`, and on DRA the partitions, counters, capacity and taints
//! of `dra_layout`, which may not move a name a prepared claim holds,
//! `held`); `resource` is the per-resource swap point ([`Resource`]), whose
//! health lines `health_log` rate-limits, `admission` the decisions on top
//! of it ([`Resource::allocate`], answering a `grant` or an
//! `admission_error`), `dra_actions` the DRA prepare and unprepare
//! guests ([`Resource::dra_prepare`]) and `bind_vetting` the `passthrough`
//! guest's say before a bind ([`Resource::may_bind`], WIT 0.1.3); `cdi_spec` turns a resource into its
//! CDI spec; `metrics` counts what the pipeline does (the other layers
//! count the rest into the same registry); `error` says what stops a
//! resource from being served ([`ResourceError`]); `withholding` the
//! devices a resource may not offer while it moves between the kubelet
//! APIs ([`Withholding`]).

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod admin_grants;
mod admission;
mod admission_error;
mod bind_vetting;
mod builtin;
mod cdi_spec;
mod companions;
mod convert;
mod device_set;
mod dra_actions;
mod dra_layout;
mod error;
mod grant;
mod guest_call;
mod health_log;
mod held;
mod loading;
mod metrics;
mod pipeline;
mod resource;
mod scan;
mod services;
mod spec;
mod validate;
mod withholding;

pub use admission_error::AdmissionError;
pub use bind_vetting::BindRefusal;
pub use cdi_spec::{cdi_edits, cdi_node, cdi_spec};
pub use companions::wanted as wanted_companions;
pub use device_set::{AdvertisedDevice, CandidateLookup, DeviceSet, SharedDeviceSet};
pub use dra_layout::{
    DraExtras, MAX_GUEST_TAINTS, MAX_GUEST_TAINTS_V2, MAX_PARTITIONS, TaintSource,
};
pub use error::{GuestProblem, ResourceError};
pub use grant::ContainerGrant;
pub use guest_call::{GuestFailure, with_claim};
pub use held::HeldDevice;
pub use loading::{load_changed_specs, load_specs, ms, new_engine};
pub use metrics::{GuestLabels, ResourceLabel, ResourceMetrics, latency_histogram};
pub use resource::Resource;
pub use spec::ResourceSpec;
pub use validate::preferred as check_preferred_answer;
pub use withholding::Withholding;
