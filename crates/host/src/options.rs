//! Where the host reads and serves: the folders and names `run` is given,
//! and their defaults.

use std::path::PathBuf;

use wdp_kubelet_socket::RegistrationMode;

/// Where the host reads and serves.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// The config directory (watched for live reload).
    pub config_dir: PathBuf,
    /// The kubelet's device-plugin folder.
    pub device_plugin_dir: PathBuf,
    /// Prefix of every hardware read.
    pub host_root: PathBuf,
    /// Where CDI specs are written for resources with `cdi` on.
    pub cdi_dir: PathBuf,
    /// How resources register: `kubelet.sock` or the plugin watcher.
    pub registration: RegistrationMode,
    /// The kubelet's plugins registry folder (the plugin watcher's).
    pub plugins_registry_dir: PathBuf,
    /// The kubelet's plugins folder: a DRA driver serves
    /// `<plugins_dir>/<driver>/dra.sock`.
    pub plugins_dir: PathBuf,
    /// The host's own state (DRA checkpoints under `dra/`).
    pub state_dir: PathBuf,
    /// The kubeconfig DRA drivers reach the API server with; in-cluster
    /// configuration when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// This node's name: DRA drivers publish their ResourceSlices for it,
    /// as the pool of the same name. Required when a DRA resource exists.
    pub node_name: String,
    /// This instance's ID (the pod UID) when a rolling update may run two
    /// instances side by side; DRA drivers then name their sockets after
    /// it. `None`: the only instance.
    pub instance_id: Option<String>,
    /// The kubelet's PodResources socket: which devices running containers
    /// hold, read while a resource moves from the device-plugin API to DRA.
    pub pod_resources_socket: PathBuf,
    /// Whether a start on a refused configuration serves the last good one
    /// kept under `state_dir` (`last-good/`) instead of failing
    /// (`run --invalid-config-at-start`, `last-good` by default).
    pub serve_last_good: bool,
}

/// The default `plugins_dir`.
pub const DEFAULT_PLUGINS_DIR: &str = wdp_kubelet_api::dra::PLUGINS_PATH;
/// The default `pod_resources_socket`.
pub const DEFAULT_POD_RESOURCES_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";
/// The default `state_dir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/wasm-device-plugin";
