//! The device-plugin transport: each device-plugin resource served to the
//! kubelet through its `v1beta1.DevicePlugin` gRPC service, on a socket of
//! its own in the device-plugin folder. `server` binds the socket
//! (the lifecycle `wdp-kubelet-socket` shares with every server) before
//! registering (`kubelet_registration` on `kubelet.sock`, or through the
//! plugin watcher), and serves and registers again after every kubelet
//! restart;
//! `service` answers the five RPCs and fans `ListAndWatch` out from the
//! resource's device set; [`wire`] puts the resource's grants, refusals,
//! device list and options in the API's messages; [`metrics`] counts the
//! open streams.
//!
//! It makes no decision of its own: which devices exist, their health and
//! what a container receives come from [`wdp_resource::Resource`]. It
//! knows nothing of DRA, reloads or the config directory; the host starts
//! and stops a [`ServerHandle`] per resource.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod kubelet_registration;
pub mod metrics;
mod server;
mod service;
pub mod wire;

pub use kubelet_registration::RegisterError;
pub use metrics::DevicePluginMetrics;
pub use server::{FolderEvent, ServerHandle};
pub use wire::kubelet_status;
