//! Wire types and gRPC stubs for the kubelet protocols the host speaks:
//! `v1beta1` (the device-plugin API: `Registration` served by the kubelet,
//! `DevicePlugin` served by us), `pluginregistration` (the plugin-watcher
//! path), and for Dynamic Resource Allocation drivers [`dra`] (`DRAPlugin`
//! in `v1` and `v1beta1`) and [`dra_health`] (`DRAResourceHealth` in `v1`
//! and `v1alpha1`), and [`pod_resources`] (`PodResourcesLister`, served
//! by the kubelet). Everything here is generated at build time from the
//! protos in `proto/`, which are wire-identical to upstream `k8s.io/kubelet`;
//! this crate holds no hand-written logic beyond the constants the upstream
//! Go package exports and [`connect_unix`] / [`connect_unix_target`], which
//! dial a Unix socket.
//!
//! The generated modules allow `missing_docs` (their docs are the protos'
//! comments, where upstream wrote any); everything hand-written is
//! documented.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

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

/// The DRA kubelet-plugin API (`NodePrepareResources`,
/// `NodeUnprepareResources`), served by a DRA driver.
pub mod dra {
    /// `DRAPlugin` v1, proto package `k8s.io.kubelet.pkg.apis.dra.v1`
    /// (kubelets from 1.34).
    pub mod v1 {
        #![allow(clippy::all, clippy::pedantic, missing_docs)]
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1");

        /// The service name a driver lists in `PluginInfo.supported_versions`.
        pub const SERVICE: &str = "v1.DRAPlugin";
    }

    /// `DRAPlugin` v1beta1, proto package
    /// `k8s.io.kubelet.pkg.apis.dra.v1beta1` (kubelets 1.32 and 1.33).
    pub mod v1beta1 {
        #![allow(clippy::all, clippy::pedantic, missing_docs)]
        tonic::include_proto!("k8s.io.kubelet.pkg.apis.dra.v1beta1");

        /// The service name a driver lists in `PluginInfo.supported_versions`.
        pub const SERVICE: &str = "v1beta1.DRAPlugin";
    }

    /// Default folder holding each DRA driver's `<driver>/dra.sock`.
    pub const PLUGINS_PATH: &str = "/var/lib/kubelet/plugins";
    /// File name of a driver's DRA socket inside `<plugins dir>/<driver>/`.
    pub const DRA_SOCKET: &str = "dra.sock";
    /// Seconds the kubelet waits for one DRA call.
    pub const KUBELET_CALL_TIMEOUT_SECS: u64 = 45;
}

/// The optional DRA device-health stream (`NodeWatchResources`).
pub mod dra_health {
    /// `DRAResourceHealth` v1, proto package `v1` (the newest kubelets).
    pub mod v1 {
        #![allow(clippy::all, clippy::pedantic, missing_docs)]
        tonic::include_proto!("v1");

        /// The service name a driver lists in `PluginInfo.supported_versions`.
        pub const SERVICE: &str = "v1.DRAResourceHealth";
    }

    /// `DRAResourceHealth` v1alpha1, proto package `v1alpha1`.
    pub mod v1alpha1 {
        #![allow(clippy::all, clippy::pedantic, missing_docs)]
        tonic::include_proto!("v1alpha1");

        /// The service name a driver lists in `PluginInfo.supported_versions`.
        pub const SERVICE: &str = "v1alpha1.DRAResourceHealth";
    }

    /// Seconds after which the kubelet marks a device Unknown when no
    /// update names it, unless the update sets its own timeout.
    pub const DEFAULT_HEALTH_CHECK_TIMEOUT_SECS: i64 = 30;
    /// The longest `DeviceHealth.message` the kubelet keeps whole.
    pub const MAX_MESSAGE_CHARS: usize = 1024;
}

/// The kubelet's PodResources API (`PodResourcesLister`: which pods and
/// containers hold which devices), served by the kubelet.
pub mod pod_resources {
    /// `PodResourcesLister` v1, proto package `v1`.
    pub mod v1 {
        #![allow(clippy::all, clippy::pedantic, missing_docs)]
        include!(concat!(env!("OUT_DIR"), "/podresources/v1.rs"));
    }

    /// Default folder of the kubelet's PodResources socket.
    pub const POD_RESOURCES_PATH: &str = "/var/lib/kubelet/pod-resources";
    /// File name of the PodResources socket inside [`POD_RESOURCES_PATH`].
    pub const SOCKET: &str = "kubelet.sock";
    /// Calls per second the kubelet serves on the socket, all callers
    /// together (a token bucket; past it a call fails `ResourceExhausted`).
    pub const KUBELET_QPS: u32 = 100;
    /// Burst of that token bucket.
    pub const KUBELET_BURST: u32 = 10;
}

pub mod transport;
pub use transport::{connect_unix, connect_unix_target};
