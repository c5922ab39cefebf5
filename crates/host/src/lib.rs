//! The device-plugin host: reads the configuration directory, runs each
//! resource's discovery and health (built-in or Wasm guest), serves the
//! kubelet's `DevicePlugin` API on one Unix socket per resource, registers
//! with the kubelet and registers again after a kubelet restart, and applies
//! config-directory changes live without dropping the kubelet.
//!
//! It owns no CLI, logging setup or HTTP endpoint (the binary does), reads
//! hardware only through `wdp-hardware` and runs guests only through
//! `wdp-policy`, whose types (devices, verdicts, container responses) are
//! the host's device model too.
//!
//! The modules, in the order data flows: [`config`] parses the directory;
//! [`spec`] loads a resource's guests; [`pipeline`] turns hardware into a
//! [`device_set`] through discovery and health ([`builtin`] policy or a
//! guest, through the one call path of [`guest_call`], answers checked by
//! [`validate`]); [`resource`] is the per-resource swap point and
//! [`rpc`] the kubelet decisions on top of it; [`service`] and [`server`]
//! are the gRPC side and registration, [`plugin_watcher`] the other
//! registration path (with [`authority`] letting the kubelet's requests
//! in); [`supervisor`] runs the whole and
//! [`reload`] applies edits; [`offline`] is `check` and `test`.

#![warn(missing_docs)]

pub mod authority;
pub mod builtin;
pub mod cdi;
pub mod companions;
pub mod config;
mod convert;
pub mod device_set;
pub mod dra;
pub mod error;
pub mod guest_call;
pub mod limits;
pub mod metrics;
pub mod offline;
pub mod pipeline;
pub mod plugin_watcher;
pub mod reload;
pub mod resource;
pub mod rpc;
pub mod server;
pub mod service;
mod services;
pub mod spec;
pub mod supervisor;
pub mod validate;

pub use config::{ConfigError, ConfigSet, ResourceConfig};
pub use device_set::{AdvertisedDevice, DeviceSet};
pub use error::{GuestProblem, HostError};
pub use metrics::Metrics;
pub use offline::{
    LoadedResource, PrecompileReport, ResourceReport, check, load_offline, precompile,
};
pub use plugin_watcher::{RegistrationMode, RegistrationPath};
pub use reload::ReloadSummary;
pub use resource::Resource;
pub use supervisor::{Host, HostOptions};
