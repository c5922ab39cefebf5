//! The device-plugin host: reads the configuration directory, runs each
//! resource's discovery and health (built-in or Wasm guest), serves the
//! kubelet's `DevicePlugin` API on one Unix socket per resource, registers
//! with the kubelet and registers again after a kubelet restart, and applies
//! config-directory changes live without dropping the kubelet.
//!
//! It owns no CLI, logging setup or HTTP endpoint (the binary does), reads
//! hardware only through `wdp-hardware` and runs guests only through
//! `wdp-policy`.

pub mod config;
pub mod devices;
pub mod host;
pub mod limits;
pub mod metrics;
pub mod resource;
pub mod server;
pub mod service;

pub use config::{ConfigError, ConfigSet, ResourceConfig};
pub use host::{Host, HostError, HostOptions, ReloadSummary, ResourceReport, check, load_offline};
pub use metrics::Metrics;
