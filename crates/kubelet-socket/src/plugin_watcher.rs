//! Registration through the kubelet's plugin watcher.
//!
//! Instead of calling `Register` on `kubelet.sock`, a resource can be found
//! by the kubelet: a socket in its plugins registry folder
//! (`/var/lib/kubelet/plugins_registry`) answers
//! `pluginregistration.Registration`. The kubelet dials it, calls `GetInfo`
//! (type `DevicePlugin`, the resource name, the absolute path of the
//! resource's device-plugin socket, versions `["v1beta1"]`), dials that
//! endpoint itself (`GetDevicePluginOptions`, then `ListAndWatch`) and
//! reports the outcome with `NotifyRegistrationStatus`. Removing the socket
//! deregisters the resource.
//!
//! A DRA driver registers the same way, always (the plugin watcher is its
//! only path): `<driver>-reg.sock` answers type `DRAPlugin`, the driver
//! name, its `dra.sock` and the gRPC service names it serves.
//!
//! `RegistrationSocket` serves one resource's registration socket through
//! the shared lifecycle ([`crate::served_socket`]), with the
//! `:authority` fix because the kubelet sends the socket's path as
//! `:authority`. The socket is served again when it disappears (a kubelet
//! restart may clean the folder).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::pluginregistration::{
    self, InfoRequest, RegistrationStatus, RegistrationStatusResponse,
    registration_server::{Registration, RegistrationServer},
};
use wdp_kubelet_api::v1beta1;

use crate::served_socket::{SocketServer, Unlink};

pub use wdp_kubelet_api::pluginregistration::PluginInfo;

/// Called with the plugin's name and the kubelet's verdict on every
/// `NotifyRegistrationStatus` (the host counts them in its metrics).
pub type StatusObserver = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// The default plugins registry folder the kubelet's plugin watcher watches.
pub const DEFAULT_PLUGINS_REGISTRY_DIR: &str = pluginregistration::PLUGINS_REGISTRY_PATH;

/// How the host registers its resources, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RegistrationMode {
    /// The plugin watcher when its folder exists, `kubelet.sock` otherwise.
    #[default]
    Auto,
    /// `Register` on `kubelet.sock` in the device-plugin folder.
    Kubelet,
    /// A registration socket per resource in the plugins registry folder.
    PluginWatcher,
}

impl RegistrationMode {
    /// The path this mode takes on a node whose plugins registry folder is
    /// `registry_dir`.
    pub fn resolve(self, registry_dir: &Path) -> RegistrationPath {
        match self {
            Self::Kubelet => RegistrationPath::Kubelet,
            Self::PluginWatcher => RegistrationPath::PluginWatcher,
            Self::Auto if registry_dir.is_dir() => RegistrationPath::PluginWatcher,
            Self::Auto => RegistrationPath::Kubelet,
        }
    }
}

/// How the host registers its resources, once resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegistrationPath {
    /// `Register` on `kubelet.sock`.
    Kubelet,
    /// The plugin watcher's registry folder.
    PluginWatcher,
}

impl std::fmt::Display for RegistrationPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Kubelet => "kubelet",
            Self::PluginWatcher => "plugin-watcher",
        })
    }
}

/// File name of a resource's registration socket, from its device-plugin
/// socket's name: `gpu.sock` → `gpu-reg.sock` (the `-reg.sock` suffix CSI
/// and DRA drivers use). Never starts with `.` (the watcher ignores those).
pub fn registration_socket_name(device_plugin_socket: &str) -> String {
    let stem = device_plugin_socket
        .strip_suffix(".sock")
        .unwrap_or(device_plugin_socket)
        .trim_start_matches('.');
    format!("{stem}-reg.sock")
}

/// One line saying how a resource served on `socket` registers, for
/// `check` and `test`.
pub fn describe_registration(
    path: RegistrationPath,
    device_plugin_dir: &Path,
    registry_dir: &Path,
    socket: &str,
) -> String {
    match path {
        RegistrationPath::Kubelet => format!(
            "registration: kubelet (Register on {}, endpoint {socket})",
            device_plugin_dir.join(v1beta1::KUBELET_SOCKET).display()
        ),
        RegistrationPath::PluginWatcher => format!(
            "registration: plugin-watcher ({} answers GetInfo, endpoint {})",
            registry_dir
                .join(registration_socket_name(socket))
                .display(),
            device_plugin_dir.join(socket).display()
        ),
    }
}

/// What `GetInfo` answers for a resource served at `endpoint`.
pub fn plugin_info(resource: &str, endpoint: &Path) -> PluginInfo {
    PluginInfo {
        r#type: pluginregistration::DEVICE_PLUGIN_TYPE.to_owned(),
        name: resource.to_owned(),
        // The kubelet dials this path as given: it must be absolute.
        endpoint: std::path::absolute(endpoint)
            .unwrap_or_else(|_| endpoint.to_owned())
            .display()
            .to_string(),
        supported_versions: vec![v1beta1::VERSION.to_owned()],
    }
}

/// What `GetInfo` answers for DRA driver `driver` served at `endpoint`
/// offering `services` (gRPC service names such as `v1.DRAPlugin`, newest
/// first: the kubelet takes the first it supports).
pub fn dra_plugin_info(driver: &str, endpoint: &Path, services: &[&str]) -> PluginInfo {
    PluginInfo {
        r#type: pluginregistration::DRA_PLUGIN_TYPE.to_owned(),
        name: driver.to_owned(),
        endpoint: std::path::absolute(endpoint)
            .unwrap_or_else(|_| endpoint.to_owned())
            .display()
            .to_string(),
        supported_versions: services.iter().map(|s| (*s).to_owned()).collect(),
    }
}

/// File name of DRA driver `driver`'s registration socket:
/// `<driver>-reg.sock`.
pub fn dra_registration_socket_name(driver: &str) -> String {
    format!("{driver}-reg.sock")
}

/// One resource's registration socket, served until stopped.
#[derive(Debug)]
pub struct RegistrationSocket {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl RegistrationSocket {
    /// Serves `<registry_dir>/<name>-reg.sock` for `resource`, whose
    /// device-plugin socket (already served) is `endpoint`. `registered`
    /// follows `NotifyRegistrationStatus`.
    pub fn start(
        resource: String,
        registry_dir: &Path,
        endpoint: &Path,
        registered: Arc<watch::Sender<bool>>,
        on_status: StatusObserver,
        parent: &CancellationToken,
    ) -> Self {
        let socket_name = registration_socket_name(
            &endpoint
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
        );
        let info = plugin_info(&resource, endpoint);
        Self::serve(
            resource,
            registry_dir.join(socket_name),
            info,
            registered,
            on_status,
            parent,
        )
    }

    /// Serves `socket` (in the plugins registry folder) answering `GetInfo`
    /// with `info`; `name` labels logs and metrics. `registered` follows
    /// `NotifyRegistrationStatus`. Any plugin type: device plugins and DRA
    /// drivers register the same way.
    pub fn serve(
        name: String,
        socket: PathBuf,
        info: PluginInfo,
        registered: Arc<watch::Sender<bool>>,
        on_status: StatusObserver,
        parent: &CancellationToken,
    ) -> Self {
        let stop = parent.child_token();
        let service = RegistrationService {
            info,
            resource: name,
            registered,
            on_status,
        };
        let task = tokio::spawn(serve_loop(service, socket, stop.clone()));
        Self { stop, task }
    }

    /// Stops serving and removes the socket (the kubelet deregisters).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn serve_loop(service: RegistrationService, path: PathBuf, stop: CancellationToken) {
    let span = tracing::info_span!("registration", resource = %service.resource);
    let mut server = SocketServer::new(
        span.clone(),
        "registration socket",
        service.registered.clone(),
        stop,
    )
    .with_authority_fix();
    loop {
        let service = service.clone();
        let Some(served) = server
            .serve(&path, |_| Routes::new(RegistrationServer::new(service)))
            .await
        else {
            return;
        };
        let removed = tokio::select! {
            _ = server.stop_token().cancelled() => false,
            _ = served.removed() => true,
        };
        // Unlinking is what deregisters the resource.
        served
            .close(if removed { Unlink::No } else { Unlink::IfOurs })
            .await;
        if !removed {
            return;
        }
        span.in_scope(|| tracing::info!(socket = %path.display(), "registration socket removed: serving it again"));
    }
}

#[derive(Clone)]
struct RegistrationService {
    resource: String,
    info: PluginInfo,
    registered: Arc<watch::Sender<bool>>,
    on_status: StatusObserver,
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::debug!(resource = %self.resource, endpoint = %self.info.endpoint, "the plugin watcher asked for GetInfo");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        (self.on_status)(&self.resource, status.plugin_registered);
        if status.plugin_registered {
            tracing::info!(resource = %self.resource, "registered with the kubelet through the plugin watcher");
        } else {
            tracing::warn!(resource = %self.resource, reason = %status.error, "the kubelet refused the registration; it is tried again when the kubelet restarts or the resource is served again");
        }
        self.registered.send_replace(status.plugin_registered);
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

#[cfg(test)]
#[path = "plugin_watcher_tests.rs"]
mod tests;
