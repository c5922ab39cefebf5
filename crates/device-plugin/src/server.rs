//! Serving one resource's socket and keeping it registered with the kubelet.
//!
//! The order is the kubelet's: bind and serve the socket first (the shared
//! lifecycle, [`wdp_kubelet_socket::served_socket`]), then register. On
//! the `kubelet.sock` path ([`crate::kubelet_registration`]) that is a
//! `Register` call, inside which the kubelet dials back, made again at
//! every sign of a kubelet restart (`kubelet.sock` created again). On the
//! plugin-watcher path ([`wdp_kubelet_socket::plugin_watcher`]) a
//! registration socket in the plugins registry folder is served beside the
//! resource's socket, and served anew whenever it is (the kubelet then
//! registers again). When the resource's socket is removed (a restarting
//! kubelet cleans its folder) it is served and registered again.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::Routes;
use wdp_kubelet_api::v1beta1::device_plugin_server::DevicePluginServer;

use crate::kubelet_registration::KubeletRegistration;
use crate::metrics::DevicePluginMetrics;
use crate::service::DevicePluginService;
use wdp_kubelet_socket::{RegistrationSocket, ServedSocket, SocketServer, Unlink};
use wdp_resource::Resource;

/// A change in the device-plugin folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FolderEvent {
    /// `kubelet.sock` appeared: a kubelet (re)started.
    KubeletSocketCreated,
    /// A file was removed (or renamed away).
    Removed(String),
}

/// Controls for a running resource server.
#[derive(Debug)]
pub struct ServerHandle {
    stop: CancellationToken,
    exiting: Arc<AtomicBool>,
    task: JoinHandle<()>,
    reregister: Arc<Notify>,
    registered: watch::Receiver<bool>,
    retiring: watch::Sender<bool>,
}

impl ServerHandle {
    /// Starts serving and registering `resource` in `dir`: through
    /// `kubelet.sock` there, or, when `registry` is given, through a
    /// registration socket in that plugins registry folder; counted in
    /// `metrics`.
    pub fn start(
        resource: Arc<Resource>,
        metrics: Arc<DevicePluginMetrics>,
        dir: PathBuf,
        registry: Option<PathBuf>,
        events: &broadcast::Sender<FolderEvent>,
        parent: &CancellationToken,
    ) -> Self {
        let stop = parent.child_token();
        let exiting = Arc::new(AtomicBool::new(false));
        let reregister = Arc::new(Notify::new());
        let (registered_tx, registered) = watch::channel(false);
        let retiring = watch::Sender::new(false);
        // At 0 from the start, so "no stream" is a value alerts can see
        // (only device-plugin resources have this series).
        let _ = metrics.streams_of(resource.name());
        let supervisor = Supervisor {
            name: resource.name().to_owned(),
            resource,
            metrics,
            dir,
            registry,
            events: events.subscribe(),
            reregister: reregister.clone(),
            registered: Arc::new(registered_tx),
            retiring: retiring.subscribe(),
            stop: stop.clone(),
            exiting: exiting.clone(),
        };
        let task = tokio::spawn(supervisor.run());
        Self {
            stop,
            exiting,
            task,
            reregister,
            registered,
            retiring,
        }
    }

    /// Hands the resource over to the DRA API: from now on the server
    /// offers no device (every one `Unhealthy` in `ListAndWatch`, so the
    /// kubelet's allocatable count drops to 0, and `Allocate` and
    /// `GetPreferredAllocation` refused) but stays registered, so that
    /// containers holding devices through it start again as before (the
    /// kubelet drops a stopped plugin's endpoint after 5 minutes, and a
    /// restarting container then cannot start). `false` offers devices
    /// again (a switch back before the handover finished).
    pub fn set_retiring(&self, retiring: bool) {
        self.retiring
            .send_if_modified(|now| std::mem::replace(now, retiring) != retiring);
    }

    /// Whether the server offers no device ([`set_retiring`](Self::set_retiring)).
    pub fn is_retiring(&self) -> bool {
        *self.retiring.borrow()
    }

    /// Registers again (options changed) or serves again (socket changed).
    pub fn reregister(&self) {
        self.reregister.notify_one();
    }

    /// Whether the kubelet accepted the latest registration.
    pub fn is_registered(&self) -> bool {
        *self.registered.borrow()
    }

    /// A receiver of the registration state.
    pub fn registered(&self) -> watch::Receiver<bool> {
        self.registered.clone()
    }

    /// Ends streams, stops serving and removes the socket.
    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }

    /// Marks it for a process that exits once it stops: when it stops
    /// (however the stop comes: this handle's [`stop`](Self::stop) or the
    /// parent token), the socket goes (and the registration socket, where
    /// there is one), but the kubelet's connections and their streams are
    /// left for the exit to close
    /// ([`ServedSocket::unlink_before_exit`]). Call it before the parent
    /// token is cancelled.
    pub fn exit_when_stopped(&self) {
        self.exiting.store(true, Ordering::Release);
    }
}

/// How often `kubelet.sock` is looked at besides the folder watcher's
/// events.
const KUBELET_RECHECK: Duration = Duration::from_secs(1);

/// How the served socket is registered.
enum Registration {
    /// `Register` on `kubelet.sock`.
    Kubelet(KubeletRegistration),
    /// A registration socket the plugin watcher finds (it comes to us).
    PluginWatcher {
        registry: PathBuf,
        socket: Option<RegistrationSocket>,
    },
}

/// Why a served socket is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Closing {
    /// Stopped: unlink it and return.
    Stop,
    /// It was removed (a kubelet restart): serve it again.
    Removed,
    /// The configuration names another socket: unlink it and serve that.
    Renamed,
}

/// One resource's server: serves its socket again and again, and keeps
/// it registered, until stopped.
struct Supervisor {
    resource: Arc<Resource>,
    metrics: Arc<DevicePluginMetrics>,
    name: String,
    dir: PathBuf,
    registry: Option<PathBuf>,
    events: broadcast::Receiver<FolderEvent>,
    reregister: Arc<Notify>,
    registered: Arc<watch::Sender<bool>>,
    retiring: watch::Receiver<bool>,
    stop: CancellationToken,
    /// Set before `stop` is cancelled when the process exits next.
    exiting: Arc<AtomicBool>,
}

impl Supervisor {
    async fn run(mut self) {
        let span = tracing::info_span!("device_plugin", resource = %self.name);
        let mut server =
            SocketServer::new(span, "socket", self.registered.clone(), self.stop.clone());
        loop {
            // Served while the first scan runs, unless only the scan can say
            // what the registration offers.
            if self.resource.registration_waits_for_scan() {
                tokio::select! {
                    _ = self.resource.wait_first_scan() => {}
                    _ = self.stop.cancelled() => return,
                }
            }
            let socket = self.resource.spec().config.socket.clone();
            let path = self.dir.join(&socket);
            let resource = self.resource.clone();
            let metrics = self.metrics.clone();
            let retiring = self.retiring.clone();
            let calls = TaskTracker::new();
            let routes = |server_stop| {
                Routes::new(DevicePluginServer::new(
                    DevicePluginService::new(resource, metrics, server_stop)
                        .with_retiring(retiring)
                        .with_calls(calls.clone()),
                ))
            };
            let Some(served) = server.serve(&path, routes).await else {
                return;
            };
            let mut registration = match &self.registry {
                Some(registry) => Registration::PluginWatcher {
                    socket: Some(self.registration_socket(registry, &served)),
                    registry: registry.clone(),
                },
                None => Registration::Kubelet(KubeletRegistration::new(&self.dir)),
            };
            let closing = self.watch(&served, &socket, &mut registration).await;
            // The registration socket goes first: the kubelet deregisters.
            if let Registration::PluginWatcher {
                socket: Some(socket),
                ..
            } = registration
            {
                socket.stop().await;
            }
            if closing == Closing::Stop && self.exiting.load(Ordering::Acquire) {
                served.unlink_before_exit();
                // Calls being answered finish first (each bounded by its
                // guest's deadline); the kubelet's connections then close
                // with the process.
                calls.close();
                if !calls.is_empty() {
                    tracing::info!(resource = %self.name, calls = calls.len(), "socket removed; answering the calls in progress before the exit");
                }
                calls.wait().await;
                tracing::info!(resource = %self.name, "socket removed; the exit closes the kubelet's connections");
                return;
            }
            let unlink = if closing == Closing::Removed {
                Unlink::No
            } else {
                Unlink::IfOurs
            };
            served.close(unlink).await;
            match closing {
                Closing::Stop => {
                    tracing::info!(resource = %self.name, "stopped");
                    return;
                }
                Closing::Removed => {
                    tracing::info!(resource = %self.name, reason = "our socket was removed", "serving again")
                }
                Closing::Renamed => {
                    tracing::info!(resource = %self.name, reason = "the socket name changed", "serving again")
                }
            }
        }
    }

    fn registration_socket(
        &self,
        registry: &std::path::Path,
        served: &ServedSocket,
    ) -> RegistrationSocket {
        RegistrationSocket::start(
            self.name.clone(),
            registry,
            served.path(),
            self.registered.clone(),
            self.metrics.kubelet.registration_observer(),
            &self.stop,
        )
    }

    /// Keeps `served` registered until it must close.
    async fn watch(
        &mut self,
        served: &ServedSocket,
        socket: &str,
        registration: &mut Registration,
    ) -> Closing {
        // Whether `GetPreferredAllocation` is offered can follow the
        // devices (NUMA nodes appearing or going): the kubelet reads it
        // when it registers the resource, so a change registers again.
        let mut devices = self.resource.subscribe();
        let mut offers_preferred = self.resource.offers_preferred_allocation();
        loop {
            let due = match registration {
                Registration::Kubelet(kubelet) => kubelet.due(),
                Registration::PluginWatcher { .. } => None,
            };
            if let (Registration::Kubelet(kubelet), Some(due)) = (&mut *registration, due)
                && tokio::time::Instant::now() >= due
            {
                // A restarting kubelet deletes our socket before it serves
                // again: serve a fresh socket first, or its dial-back fails.
                if !served.is_ours() {
                    return Closing::Removed;
                }
                kubelet
                    .attempt(&self.resource, &self.metrics.kubelet, &self.registered)
                    .await;
                continue;
            }
            tokio::select! {
                _ = self.stop.cancelled() => return Closing::Stop,
                _ = served.removed() => return Closing::Removed,
                event = self.events.recv() => match (event, &mut *registration) {
                    (Ok(FolderEvent::KubeletSocketCreated), Registration::Kubelet(kubelet)) => {
                        kubelet.kubelet_socket_created(&self.name);
                    }
                    (Err(broadcast::error::RecvError::Lagged(_)), Registration::Kubelet(kubelet)) => {
                        kubelet.register_again();
                    }
                    (Err(broadcast::error::RecvError::Closed), _) => return Closing::Stop,
                    _ => {}
                },
                _ = self.reregister.notified() => {
                    if self.resource.spec().config.socket != socket {
                        return Closing::Renamed;
                    }
                    offers_preferred = self.resource.offers_preferred_allocation();
                    self.register_again(served, registration).await;
                }
                Ok(()) = devices.changed() => {
                    let now = self.resource.offers_preferred_allocation();
                    if now != offers_preferred {
                        offers_preferred = now;
                        tracing::info!(resource = %self.name, get_preferred_allocation = now, "the devices changed what GetPreferredAllocation adds; registering again");
                        self.register_again(served, registration).await;
                    }
                }
                _ = tokio::time::sleep(KUBELET_RECHECK) => {
                    if let Registration::Kubelet(kubelet) = registration {
                        kubelet.check_kubelet_socket(&self.name);
                    }
                }
                _ = sleep_until_due(due) => {}
            }
        }
    }

    /// The resource's options changed: the kubelet reads them when it
    /// registers it.
    async fn register_again(&self, served: &ServedSocket, registration: &mut Registration) {
        match registration {
            Registration::Kubelet(kubelet) => kubelet.register_again(),
            Registration::PluginWatcher { registry, socket } => {
                // The kubelet reads the options when it connects: a new
                // registration socket makes it connect again.
                if let Some(old) = socket.take() {
                    old.stop().await;
                }
                *socket = Some(self.registration_socket(registry, served));
            }
        }
    }
}

/// Resolves at `due`, never without one.
async fn sleep_until_due(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}
