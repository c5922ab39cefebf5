//! Wire types and gRPC stubs for the two kubelet protocols a device plugin
//! speaks: `v1beta1` (the device-plugin API: `Registration` served by the
//! kubelet, `DevicePlugin` served by us) and `pluginregistration` (the
//! plugin-watcher path). Everything here is generated at build time from the
//! protos in `proto/`, which are wire-identical to upstream `k8s.io/kubelet`;
//! this crate holds no hand-written logic beyond the constants the upstream
//! Go package exports and [`connect_unix`], which dials a Unix socket.
//!
//! The generated modules allow `missing_docs` (their docs are the protos'
//! comments, where upstream wrote any); everything hand-written is
//! documented.

#![warn(missing_docs)]

/// The device-plugin API, package `v1beta1`.
pub mod v1beta1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("v1beta1");

    /// The API version string sent in `RegisterRequest.version`.
    pub const VERSION: &str = "v1beta1";
    /// Health string of a usable device.
    pub const HEALTHY: &str = "Healthy";
    /// Health string of a device that must not be allocated.
    pub const UNHEALTHY: &str = "Unhealthy";
    /// Folder where the kubelet and device plugins keep their sockets.
    pub const DEVICE_PLUGIN_PATH: &str = "/var/lib/kubelet/device-plugins/";
    /// File name of the kubelet's registration socket inside [`DEVICE_PLUGIN_PATH`].
    pub const KUBELET_SOCKET: &str = "kubelet.sock";
    /// Seconds the kubelet waits for `PreStartContainer`.
    pub const PRE_START_CONTAINER_TIMEOUT_SECS: u64 = 30;
}

/// The plugin-watcher registration API, package `pluginregistration`.
pub mod pluginregistration {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("pluginregistration");

    /// `PluginInfo.type` of a device plugin.
    pub const DEVICE_PLUGIN_TYPE: &str = "DevicePlugin";
    /// `PluginInfo.type` of a CSI driver.
    pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
    /// `PluginInfo.type` of a Dynamic Resource Allocation driver.
    pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";
    /// Folder the kubelet's plugin watcher watches for registration sockets.
    pub const PLUGINS_REGISTRY_PATH: &str = "/var/lib/kubelet/plugins_registry";
}

pub mod transport;
pub use transport::connect_unix;
