//! Serving the kubelet over Unix sockets, for both of its plugin
//! protocols: one socket lifecycle every server shares
//! ([`served_socket`]: bind, serve, notice removal, serve again with
//! [`backoff`], registered, stop), the registration socket the kubelet's plugin watcher finds
//! in its plugins registry folder (`pluginregistration.Registration`, for
//! device plugins and DRA drivers alike), and the `:authority` fix that
//! lets the kubelet's connections through tonic at all; and the one
//! kubelet socket it reads rather than serves, PodResources
//! ([`pod_resources`]: which devices running containers hold), and the
//! kubelet's own record of its device plugins
//! ([`device_manager_checkpoint`]: which resources a device plugin served
//! on this node).
//!
//! It knows no resource, device or guest: what a socket announces
//! ([`plugin_watcher::PluginInfo`]) and what happens when the kubelet
//! answers (a `watch` flag and a callback) come from the caller. The
//! device-plugin transport (`wdp-device-plugin`) and the DRA driver
//! (`wdp-dra-driver`) serve their own gRPC services through it, and count
//! what both do with the kubelet (RPCs, registrations) in [`metrics`].

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod authority;
pub mod backoff;
pub mod device_manager_checkpoint;
pub mod metrics;
pub mod plugin_watcher;
pub mod pod_resources;
pub mod served_socket;

pub use authority::AuthorityFix;
pub use backoff::Backoff;
pub use metrics::KubeletMetrics;
pub use plugin_watcher::{
    DEFAULT_PLUGINS_REGISTRY_DIR, RegistrationMode, RegistrationPath, RegistrationSocket,
    StatusObserver,
};
pub use pod_resources::{PodResourcesError, PodResourcesReader};
pub use served_socket::{ServedSocket, SocketServer, Unlink};
