//! One DRA driver at run time: its `DRAPlugin` socket
//! (`<plugins-dir>/<driver>/dra.sock`, both API versions and the
//! `DRAResourceHealth` stream in both, through the `:authority` fix), its
//! ResourceSlices following the device set, and its registration socket
//! (`<plugins-registry-dir>/<driver>-reg.sock`, type `DRAPlugin`), served
//! until stopped. The socket is served again if something removes it.
//! Stopping removes both sockets; prepared claims, their CDI specs and the
//! published slices stay (the kubelet removes a gone driver's slices after
//! its grace period; a rolling update must not empty the node).
//!
//! With an instance ID (the pod's UID, for rolling updates) the sockets
//! are `dra-<id>.sock` and `<driver>-<id>-reg.sock`, so two instances
//! register side by side (kubelet 1.33 and later keep both and call the
//! newest); they share the checkpoint, and the newest publishes the slices
//! (`crate::handover`). Sockets an earlier instance left behind (nothing
//! listens on them any more) are removed at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use wdp_dra_client::{PoolTarget, PublishStatus};
use wdp_kubelet_api::dra::{self, v1, v1beta1};
use wdp_kubelet_api::dra_health;

use crate::api_port::ApiPort;
use crate::checkpoint::Checkpoint;
use crate::cleanup;
use crate::device_metadata::{MetadataWriter, metadata_root};
use crate::draining::Draining;
use crate::handover::Handover;
use crate::health::HealthService;
use crate::metrics::DraMetrics;
use crate::passthrough::{self, PassthroughBinds};
use crate::prepare::ClaimPreparer;
use crate::publish::SliceSync;
use crate::service::{DraPluginService, DraPluginV1beta1};
use wdp_kubelet_socket::plugin_watcher::{
    RegistrationSocket, dra_plugin_info, dra_registration_socket_name,
};
use wdp_kubelet_socket::{SocketServer, StatusObserver, Unlink};
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
    /// This instance's ID (the pod UID) when two instances may run side by
    /// side during a rolling update; `None`: the only instance.
    pub instance: Option<String>,
}

impl DriverPaths {
    /// The DRA socket of `driver`: `dra.sock`, or `dra-<id>.sock`.
    pub fn dra_socket(&self, driver: &str) -> PathBuf {
        let dir = self.plugins_dir.join(driver);
        match &self.instance {
            None => dir.join(dra::DRA_SOCKET),
            Some(id) => dir.join(format!("dra-{id}.sock")),
        }
    }

    /// The registration socket of `driver`: `<driver>-reg.sock`, or
    /// `<driver>-<id>-reg.sock`.
    pub fn registration_socket(&self, driver: &str) -> PathBuf {
        self.plugins_registry_dir.join(match &self.instance {
            None => dra_registration_socket_name(driver),
            Some(id) => dra_registration_socket_name(&format!("{driver}-{id}")),
        })
    }

    /// The ID this instance goes by in the handover: its instance ID, or
    /// one made of the process ID when it runs alone.
    pub(crate) fn instance_id(&self) -> String {
        self.instance
            .clone()
            .unwrap_or_else(|| format!("pid-{}", std::process::id()))
    }
}

/// A served DRA driver.
#[derive(Debug)]
pub struct DraDriver {
    driver: String,
    preparer: Arc<ClaimPreparer>,
    registered: watch::Receiver<bool>,
    slices: SliceSync,
    handover: Handover,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl DraDriver {
    /// Serves `resource` as `driver`: its checkpoint is read, its sockets
    /// served, its device set published as ResourceSlices through `api`,
    /// which also reads its claims; counted in `metrics`.
    pub fn start(
        resource: Arc<Resource>,
        metrics: Arc<DraMetrics>,
        driver: &str,
        paths: &DriverPaths,
        api: &Arc<dyn ApiPort>,
        parent: &CancellationToken,
    ) -> Self {
        let checkpoint = Checkpoint::load(&paths.state_dir, driver);
        metrics.set_driver(resource.name(), driver);
        let stop = parent.child_token();
        let (preparer, service) =
            claim_service(&resource, &metrics, driver, paths, api, checkpoint, &stop);
        let (registered_tx, registered) = watch::channel(false);
        remove_stale_sockets(paths, driver);
        let handover = Handover::start(&paths.state_dir, driver, &paths.instance_id(), &stop);
        let target = PoolTarget::new(driver, paths.node_name.clone())
            .with_min_write_interval(resource.spec().config.publish_interval);
        let publisher_api = Arc::clone(api);
        let publisher_stop = stop.clone();
        let fence = handover.write_fence();
        let slices = SliceSync::start(
            driver,
            resource.subscribe(),
            Box::new(move || {
                publisher_api.spawn_publisher(target.clone(), fence.clone(), &publisher_stop)
            }),
            (handover.leading(), {
                let resource = Arc::clone(&resource);
                Box::new(move || passthrough::binding_conditions(&resource.spec().config))
            }),
            metrics.clone(),
        );
        tokio::spawn(passthrough::recover_then_follow(
            Arc::clone(&preparer),
            Arc::clone(api),
            handover.leading(),
            stop.clone(),
        ));
        let health = HealthService::new(resource.subscribe(), driver, paths.node_name.clone())
            .with_stop(stop.clone());
        let task = tokio::spawn(serve_loop(
            driver.to_owned(),
            paths.clone(),
            service,
            health,
            Arc::new(registered_tx),
            metrics.kubelet.registration_observer(),
            stop.clone(),
        ));
        Self {
            driver: driver.to_owned(),
            preparer,
            registered,
            slices,
            handover,
            stop,
            task,
        }
    }

    /// The slice publisher's progress (published generation, last error,
    /// whether the API server drops taints).
    pub fn publish_status(&self) -> watch::Receiver<PublishStatus> {
        self.slices.status()
    }

    /// Applies a live reload's `publish-interval-ms` to the publisher.
    pub fn set_publish_interval(&self, interval: Duration) {
        self.slices.set_write_interval(interval);
    }

    /// Whether this instance publishes the slices now (during a rolling
    /// update only the newest does).
    pub fn is_publishing(&self) -> bool {
        *self.handover.leading().borrow()
    }

    /// Ready: registered with the kubelet and the slices published (by this
    /// instance, or by the newer one that took over); else why not, naming
    /// the driver.
    pub fn readiness(&self) -> Result<(), String> {
        let status = self.slices.status().borrow().clone();
        if !self.is_publishing() {
            return match self.is_registered() {
                true => Ok(()),
                false => Err(format!(
                    "DRA driver {}: not registered with the kubelet",
                    self.driver
                )),
            };
        }
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
        self.handover.stop().await;
    }

    /// The resource left the configuration: its slices are deleted (by the
    /// instance that publishes them) and new prepares refused; the claims
    /// it prepared are still unprepared (their CDI specs go then) by the
    /// returned [`Draining`], which serves the sockets until none is left
    /// or it is stopped. `None` when no claim was prepared: the sockets are
    /// gone already.
    pub async fn withdraw(self) -> Option<Draining> {
        self.preparer.start_draining();
        let publishing = self.is_publishing();
        match self.slices.withdraw().await {
            Ok(deleted) if publishing => {
                tracing::info!(driver = %self.driver, deleted, "ResourceSlices withdrawn")
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(driver = %self.driver, %error, "cannot withdraw the ResourceSlices")
            }
        }
        let left = self.preparer.prepared_claims().await.len();
        if left == 0 {
            self.stop.cancel();
            let _ = self.task.await;
            self.handover.stop().await;
            return None;
        }
        tracing::info!(driver = %self.driver, claims = left, "resource removed from the configuration: the driver keeps serving until the kubelet has unprepared the claims it prepared");
        let Self {
            driver,
            preparer,
            handover,
            stop,
            task,
            ..
        } = self;
        Some(Draining::follow(driver, preparer, handover, stop, task))
    }
}

/// Removes the sockets of `driver` that an earlier instance left behind
/// (it was killed before it could): a registration socket nothing listens
/// on, and the DRA socket it named. A live instance's sockets answer and
/// stay.
pub(crate) fn remove_stale_sockets(paths: &DriverPaths, driver: &str) {
    let plain = dra_registration_socket_name(driver);
    let with_id = format!("{driver}-");
    let Ok(entries) = std::fs::read_dir(&paths.plugins_registry_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let instance = if name == plain {
            None
        } else {
            match name
                .strip_suffix("-reg.sock")
                .and_then(|stem| stem.strip_prefix(&with_id))
            {
                Some(id) if !id.is_empty() => Some(id.to_owned()),
                _ => continue,
            }
        };
        let dra_socket = DriverPaths {
            instance: instance.clone(),
            ..paths.clone()
        }
        .dra_socket(driver);
        // `<driver>-<id>-reg.sock` may be another driver's whose name
        // extends ours: ours only with its `dra-<id>.sock` beside it.
        let ours = instance.is_none() || dra_socket.exists();
        let path = entry.path();
        if !ours || !is_stale_socket(&path) {
            continue;
        }
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&dra_socket);
        tracing::info!(%driver, socket = %path.display(), dra_socket = %dra_socket.display(), "removed the sockets an earlier instance left behind (nothing answers on them)");
    }
}

/// The claims side of `driver` serving `resource`: its preparer over
/// `checkpoint`, the cleanup of claims deleted meanwhile (until `stop`),
/// and the `DRAPlugin` service the kubelet calls.
pub(crate) fn claim_service(
    resource: &Arc<Resource>,
    metrics: &Arc<DraMetrics>,
    driver: &str,
    paths: &DriverPaths,
    api: &Arc<dyn ApiPort>,
    checkpoint: Checkpoint,
    stop: &CancellationToken,
) -> (Arc<ClaimPreparer>, DraPluginService) {
    let preparer = Arc::new(
        ClaimPreparer::new(
            driver,
            &paths.node_name,
            resource.clone(),
            paths.cdi_dir.clone(),
            checkpoint,
        )
        .with_status_writer(Arc::clone(api))
        .with_passthrough(PassthroughBinds::open(
            driver,
            resource,
            &paths.state_dir,
            resource
                .spec()
                .config
                .passthrough
                .as_ref()
                .map_or(wdp_config::DEFAULT_BIND_TIMEOUT, |p| p.bind_timeout),
            Arc::clone(metrics),
        ))
        .with_device_metadata(MetadataWriter::new(
            metadata_root(&paths.plugins_dir, driver),
            driver,
        )),
    );
    tokio::spawn(cleanup::clean_up(
        preparer.clone(),
        Arc::clone(api),
        stop.clone(),
    ));
    let service = DraPluginService::new(preparer.clone(), Arc::clone(api), metrics.clone());
    (preparer, service)
}

/// A socket nothing listens on: connecting is refused.
fn is_stale_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    is_socket
        && matches!(
            std::os::unix::net::UnixStream::connect(path),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionRefused
        )
}

pub(crate) async fn serve_loop(
    driver: String,
    paths: DriverPaths,
    service: DraPluginService,
    health: HealthService,
    registered: Arc<watch::Sender<bool>>,
    registrations: StatusObserver,
    stop: CancellationToken,
) {
    let socket = paths.dra_socket(&driver);
    let span = tracing::info_span!("dra", %driver);
    let mut server =
        SocketServer::new(span.clone(), "DRA socket", registered.clone(), stop.clone())
            .with_authority_fix();
    loop {
        let routes = |_| {
            let mut routes =
                Routes::new(v1::dra_plugin_server::DraPluginServer::new(service.clone()));
            routes = routes.add_service(v1beta1::dra_plugin_server::DraPluginServer::new(
                DraPluginV1beta1(service.clone()),
            ));
            routes
                .add_service(health.v1_server())
                .add_service(health.v1alpha1_server())
        };
        let Some(served) = server.serve(&socket, routes).await else {
            return;
        };
        let registration = RegistrationSocket::serve(
            driver.clone(),
            paths.registration_socket(&driver),
            dra_plugin_info(&driver, &socket, &SERVICES),
            registered.clone(),
            registrations.clone(),
            &stop,
        );
        let removed = tokio::select! {
            _ = stop.cancelled() => false,
            _ = served.removed() => true,
        };
        // The registration socket goes first: the kubelet deregisters.
        registration.stop().await;
        served.close(Unlink::IfOurs).await;
        if !removed {
            return;
        }
        span.in_scope(
            || tracing::info!(socket = %socket.display(), "DRA socket removed: serving it again"),
        );
    }
}
