//! The resource model both kubelet protocols share: everything about one
//! configured resource that does not depend on how the kubelet reaches it.
//! It parses the configuration directory, loads a resource's guests, turns
//! hardware into a device set through discovery and health (built-in
//! policy or a guest), holds the per-resource swap point, decides each
//! admission (preferred allocation, allocate, pre-start), writes CDI specs
//! and counts what happens in Prometheus metrics.
//!
//! It serves no socket, registers nothing, talks to no API server and
//! speaks no protocol's wire: an admission answers a [`ContainerGrant`] or
//! an [`AdmissionError`], which the device-plugin transport
//! (`wdp-device-plugin`) turns into gRPC messages and statuses and the DRA
//! driver (`wdp-dra-driver`) into a claim's CDI spec and error, each on top
//! of [`Resource`]; the host (`wdp-host`) supervises and reloads. It reads
//! hardware only through `wdp-hardware`, runs guests only through
//! `wdp-policy`, whose types (devices, verdicts, container responses) are
//! its device model too, and judges Kubernetes names with `wdp-k8s-naming`.
//!
//! The modules, in the order data flows: [`config`] parses the directory
//! and [`limits`] bounds every size; [`loading`] and [`spec`] put a
//! resource's guests in service; `pipeline` turns hardware into a
//! [`device_set`] through discovery and health (`builtin` policy or a
//! guest, through the one call path of [`guest_call`], answers checked by
//! [`validate`], with [`companions`] added and
//! administrative nodes refused by [`admin_grants`], and on DRA the partitions,
//! counters, capacity and taints of [`dra_layout`], which may not move a
//! name a prepared claim holds ([`held`])); `resource` is the
//! per-resource swap point ([`Resource`]), whose health lines [`health_log`]
//! rate-limits, `admission` the decisions on top of it
//! ([`Resource::allocate`], answering a [`grant`] or an
//! [`admission_error`]) and [`dra_actions`] the DRA prepare and
//! unprepare guests ([`Resource::dra_prepare`]); [`cdi`] writes CDI specs,
//! through [`atomic_file`], by the naming rules of [`cdi_names`] (which
//! [`config`] follows too);
//! [`metrics`] counts what the pipeline does (the other layers count the
//! rest into the same registry); `error` says what stops a resource from being
//! served ([`ResourceError`]); [`withholding`] the devices a resource may
//! not offer while it moves between the kubelet APIs.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod admin_grants;
mod admission;
pub mod admission_error;
pub mod atomic_file;
mod builtin;
pub mod cdi;
pub mod cdi_names;
pub mod companions;
pub mod config;
mod convert;
pub mod device_set;
pub mod dra_actions;
pub mod dra_layout;
mod error;
pub mod grant;
pub mod guest_call;
pub mod health_log;
pub mod held;
pub mod limits;
pub mod loading;
pub mod metrics;
mod pipeline;
mod resource;
mod scan;
mod services;
pub mod spec;
pub mod validate;
pub mod withholding;

pub use admission_error::AdmissionError;
pub use config::{ConfigError, ConfigSet, ResourceConfig};
pub use device_set::{AdvertisedDevice, DeviceSet, SharedDeviceSet};
pub use error::{GuestProblem, ResourceError};
pub use grant::ContainerGrant;
pub use metrics::ResourceMetrics;
pub use resource::Resource;
pub use withholding::Withholding;
