//! One DRA driver at run time: its `DRAPlugin` socket
//! (`<plugins-dir>/<driver>/dra.sock`, both API versions and the
//! `DRAResourceHealth` stream in both, through the `:authority` fix), its
//! ResourceSlices following the device set, and its registration socket
//! (`<plugins-registry-dir>/<driver>-reg.sock`, type `DRAPlugin`), served
//! until stopped. The socket is served again if something removes it.
//! Stopping removes both sockets; prepared claims, their CDI specs and the
//! published slices stay (the kubelet removes a gone driver's slices after
//! its grace period; a rolling update must not empty the node).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{PoolTarget, PublishStatus};
use wdp_kubelet_api::dra::{self, v1, v1beta1};
use wdp_kubelet_api::dra_health;

use crate::checkpoint::Checkpoint;
use crate::health::HealthService;
use crate::kube_api::DraApi;
use crate::prepare::ClaimPreparer;
use crate::publish::SliceSync;
use crate::service::{DraPluginService, DraPluginV1beta1};
use wdp_kubelet_socket::AuthorityFix;
use wdp_kubelet_socket::plugin_watcher::{
    RegistrationSocket, dra_plugin_info, dra_registration_socket_name,
};
use wdp_resource::Resource;

/// The gRPC services a driver offers the kubelet, newest first (the
/// kubelet takes the first `DRAPlugin` and the first `DRAResourceHealth`
/// it supports).
pub const SERVICES: [&str; 4] = [
    v1::SERVICE,
    v1beta1::SERVICE,
    dra_health::v1::SERVICE,
    dra_health::v1alpha1::SERVICE,
];

/// Where a driver lives on the node.
#[derive(Clone, Debug)]
pub struct DriverPaths {
    /// The kubelet's plugins folder (`<dir>/<driver>/dra.sock`).
    pub plugins_dir: PathBuf,
    /// The plugin watcher's registry folder.
    pub plugins_registry_dir: PathBuf,
    /// The CDI folder claims' specs go to.
    pub cdi_dir: PathBuf,
    /// The host's state folder (the checkpoint under `dra/`).
    pub state_dir: PathBuf,
    /// This node's name: the ResourceSlice pool.
    pub node_name: String,
}

impl DriverPaths {
    /// The DRA socket of `driver`.
    pub fn dra_socket(&self, driver: &str) -> PathBuf {
        self.plugins_dir.join(driver).join(dra::DRA_SOCKET)
    }

    /// The registration socket of `driver`.
    pub fn registration_socket(&self, driver: &str) -> PathBuf {
        self.plugins_registry_dir
            .join(dra_registration_socket_name(driver))
    }
}

/// A served DRA driver.
#[derive(Debug)]
pub struct DraDriver {
    driver: String,
    preparer: Arc<ClaimPreparer>,
    registered: watch::Receiver<bool>,
    slices: SliceSync,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl DraDriver {
    /// Serves `resource` as `driver`: its checkpoint is read, its sockets
    /// served, its device set published as ResourceSlices through `api`,
    /// which also reads its claims.
    pub fn start(
        resource: Arc<Resource>,
        driver: &str,
        paths: &DriverPaths,
        api: &DraApi,
        parent: &CancellationToken,
    ) -> Self {
        let checkpoint = Checkpoint::load(&paths.state_dir, driver);
        let preparer = Arc::new(ClaimPreparer::new(
            driver,
            &paths.node_name,
            resource.clone(),
            paths.cdi_dir.clone(),
            checkpoint,
        ));
        let service = DraPluginService::new(
            preparer.clone(),
            api.read_claim.clone(),
            resource.metrics().clone(),
        );
        let (registered_tx, registered) = watch::channel(false);
        let stop = parent.child_token();
        let publisher =
            (api.spawn_publisher)(PoolTarget::new(driver, paths.node_name.clone()), &stop);
        let slices = SliceSync::start(
            driver,
            resource.subscribe(),
            publisher,
            resource.metrics().clone(),
        );
        let health = HealthService::new(resource.subscribe(), driver, paths.node_name.clone())
            .with_stop(stop.clone());
        let task = tokio::spawn(serve_loop(
            driver.to_owned(),
            paths.clone(),
            service,
            health,
            Arc::new(registered_tx),
            resource,
            stop.clone(),
        ));
        Self {
            driver: driver.to_owned(),
            preparer,
            registered,
            slices,
            stop,
            task,
        }
    }

    /// The slice publisher's progress (published generation, last error,
    /// whether the API server drops taints).
    pub fn publish_status(&self) -> watch::Receiver<PublishStatus> {
        self.slices.status()
    }

    /// Ready: registered with the kubelet and the slices published; else
    /// why not, naming the driver.
    pub fn readiness(&self) -> Result<(), String> {
        let status = self.slices.status().borrow().clone();
        match (self.is_registered(), &status.published, &status.error) {
            (_, _, Some(error)) => Err(format!(
                "DRA driver {}: ResourceSlices not published: {error}",
                self.driver
            )),
            (_, None, None) => Err(format!(
                "DRA driver {}: ResourceSlices not published yet",
                self.driver
            )),
            (false, _, None) => Err(format!(
                "DRA driver {}: not registered with the kubelet",
                self.driver
            )),
            (true, Some(_), None) => Ok(()),
        }
    }

    /// The driver name.
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// Prepares and unprepares its claims.
    pub fn preparer(&self) -> &Arc<ClaimPreparer> {
        &self.preparer
    }

    /// Whether the kubelet accepted the registration.
    pub fn is_registered(&self) -> bool {
        *self.registered.borrow()
    }

    /// Follows the registration state.
    pub fn registered(&self) -> watch::Receiver<bool> {
        self.registered.clone()
    }

    /// Stops serving; both sockets go, the slices stay (a clean shutdown
    /// or restart must not empty the node).
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
        self.slices.stop().await;
    }

    /// Stops serving and deletes the driver's slices (the resource left
    /// the configuration); prepared claims keep their CDI specs until the
    /// kubelet unprepares them.
    pub async fn withdraw(self) {
        self.stop.cancel();
        let _ = self.task.await;
        match self.slices.withdraw().await {
            Ok(deleted) => {
                tracing::info!(driver = %self.driver, deleted, "ResourceSlices withdrawn")
            }
            Err(error) => {
                tracing::warn!(driver = %self.driver, %error, "cannot withdraw the ResourceSlices")
            }
        }
    }
}

fn inode(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

async fn serve_loop(
    driver: String,
    paths: DriverPaths,
    service: DraPluginService,
    health: HealthService,
    registered: Arc<watch::Sender<bool>>,
    resource: Arc<Resource>,
    stop: CancellationToken,
) {
    let socket = paths.dra_socket(&driver);
    let mut wait = Duration::from_millis(25);
    loop {
        let bound = socket
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                let _ = std::fs::remove_file(&socket);
                UnixListener::bind(&socket)
            });
        let listener = match bound {
            Ok(listener) => listener,
            Err(error) => {
                tracing::error!(%driver, socket = %socket.display(), %error, "cannot serve the DRA socket; retrying in {wait:?}");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        wait = Duration::from_millis(25);
        let ours = inode(&socket);
        let server_stop = CancellationToken::new();
        let incoming = UnixListenerStream::new(listener).map(|conn| conn.map(AuthorityFix::new));
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(v1::dra_plugin_server::DraPluginServer::new(service.clone()))
                .add_service(v1beta1::dra_plugin_server::DraPluginServer::new(
                    DraPluginV1beta1(service.clone()),
                ))
                .add_service(health.v1_server())
                .add_service(health.v1alpha1_server())
                .serve_with_incoming_shutdown(incoming, server_stop.clone().cancelled_owned()),
        );
        tracing::info!(%driver, socket = %socket.display(), "serving the DRA socket");
        let registration = RegistrationSocket::serve(
            driver.clone(),
            paths.registration_socket(&driver),
            dra_plugin_info(&driver, &socket, &SERVICES),
            registered.clone(),
            resource.metrics().registration_observer(),
            &stop,
        );
        let gone = loop {
            tokio::select! {
                _ = stop.cancelled() => break false,
                _ = tokio::time::sleep(Duration::from_secs(1)) => if inode(&socket) != ours { break true },
            }
        };
        registration.stop().await;
        if inode(&socket) == ours {
            let _ = std::fs::remove_file(&socket);
        }
        server_stop.cancel();
        if let Ok(Err(error)) = server.await {
            tracing::warn!(%driver, %error, "DRA server ended with an error");
        }
        if !gone {
            registered.send_replace(false);
            return;
        }
        tracing::info!(%driver, socket = %socket.display(), "DRA socket removed: serving it again");
    }
}
