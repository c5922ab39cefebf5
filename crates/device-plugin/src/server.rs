//! Serving one resource's socket and keeping it registered with the kubelet.
//!
//! The order is the kubelet's: bind and serve the socket first, then call
//! `Register` (inside which the kubelet dials back). Afterwards the loop
//! watches for the two signs of a kubelet restart — `kubelet.sock` created
//! again, or our own socket deleted — and serves and registers again, with
//! backoff while no kubelet answers. Events come from the folder watcher;
//! a once-a-second check of both sockets' inodes backs it up.
//!
//! On the plugin-watcher path ([`wdp_kubelet_socket::plugin_watcher`]) `Register` is
//! never called: once the socket is served, a registration socket in the
//! plugins registry folder is served beside it, and served anew whenever
//! the device-plugin socket is (the kubelet then registers again).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::{Notify, broadcast, watch};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::v1beta1::{
    self, RegisterRequest, device_plugin_server::DevicePluginServer,
    registration_client::RegistrationClient,
};

use crate::service::DevicePluginService;
use wdp_kubelet_socket::RegistrationSocket;
use wdp_resource::Resource;

/// A change in the device-plugin folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FolderEvent {
    /// `kubelet.sock` appeared: a kubelet (re)started.
    KubeletSocketCreated,
    /// A file was removed (or renamed away).
    Removed(String),
}

/// Why a registration attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// `kubelet.sock` is not there (no kubelet yet).
    #[error("no kubelet: {} does not exist yet", .0.display())]
    NoKubelet(PathBuf),
    /// `kubelet.sock` exists but does not accept connections.
    #[error("cannot connect to {}: {source}", path.display())]
    Connect {
        /// The kubelet's socket.
        path: PathBuf,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The kubelet answered `Register` with an error.
    #[error("the kubelet refused the registration: {0}")]
    Refused(Box<tonic::Status>),
    /// The kubelet did not answer in time.
    #[error("the kubelet did not answer Register within {0:?}")]
    Timeout(Duration),
}

/// Controls for a running resource server.
#[derive(Debug)]
pub struct ServerHandle {
    stop: CancellationToken,
    task: JoinHandle<()>,
    reregister: Arc<Notify>,
    registered: watch::Receiver<bool>,
}

impl ServerHandle {
    /// Starts serving and registering `resource` in `dir`: through
    /// `kubelet.sock` there, or, when `registry` is given, through a
    /// registration socket in that plugins registry folder.
    pub fn start(
        resource: Arc<Resource>,
        dir: PathBuf,
        registry: Option<PathBuf>,
        events: &broadcast::Sender<FolderEvent>,
        parent: &CancellationToken,
    ) -> Self {
        let stop = parent.child_token();
        let reregister = Arc::new(Notify::new());
        let (registered_tx, registered) = watch::channel(false);
        // At 0 from the start, so "no stream" is a value alerts can see
        // (only device-plugin resources have this series).
        let _ = resource
            .metrics()
            .watchers
            .get_or_create(&wdp_resource::metrics::ResourceLabel {
                resource: resource.name().to_owned(),
            });
        let task = tokio::spawn(supervise(
            resource,
            dir,
            registry,
            events.subscribe(),
            reregister.clone(),
            Arc::new(registered_tx),
            stop.clone(),
        ));
        Self {
            stop,
            task,
            reregister,
            registered,
        }
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
}

/// Exponential backoff between registration attempts while a kubelet's
/// socket exists but does not answer. Reset whenever a new `kubelet.sock`
/// appears, so the first attempts after a kubelet (re)start come quickly.
struct Backoff {
    next: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(25);
    const MAX: Duration = Duration::from_secs(5);
    /// Failures retried sooner than this are the normal start-up race.
    const QUIET: Duration = Duration::from_millis(400);

    fn new() -> Self {
        Self { next: Self::FIRST }
    }

    fn step(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        now
    }

    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

/// How often a missing `kubelet.sock` is looked for besides the folder
/// watcher's events.
const NO_KUBELET_RECHECK: Duration = Duration::from_secs(1);

fn inode(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

#[allow(clippy::too_many_arguments)]
async fn supervise(
    resource: Arc<Resource>,
    dir: PathBuf,
    registry: Option<PathBuf>,
    mut events: broadcast::Receiver<FolderEvent>,
    reregister: Arc<Notify>,
    registered: Arc<watch::Sender<bool>>,
    stop: CancellationToken,
) {
    let name = resource.name().to_owned();
    let kubelet_socket = dir.join(v1beta1::KUBELET_SOCKET);
    let mut backoff = Backoff::new();
    'serve: loop {
        let socket = resource.spec().config.socket.clone();
        let path = dir.join(&socket);
        let _ = std::fs::remove_file(&path);
        let listener = match UnixListener::bind(&path) {
            Ok(listener) => listener,
            Err(error) => {
                let wait = backoff.step();
                tracing::error!(resource = %name, socket = %path.display(), %error, "cannot serve the socket; retrying in {wait:?}");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => continue 'serve,
                }
            }
        };
        let our_inode = inode(&path);
        // Not a child of `stop`: the streams end only after the socket is
        // unlinked below, so nothing sees a stream end while the socket lingers.
        let server_stop = CancellationToken::new();
        let service = DevicePluginService::new(resource.clone(), server_stop.clone());
        let shutdown = server_stop.clone();
        let server = tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(DevicePluginServer::new(service))
                .serve_with_incoming_shutdown(
                    UnixListenerStream::new(listener),
                    shutdown.cancelled_owned(),
                )
                .await
        });
        tracing::info!(resource = %name, socket = %path.display(), "serving");
        let start_registration_socket = |registry: &Path| {
            RegistrationSocket::start(
                name.clone(),
                registry,
                &path,
                registered.clone(),
                resource.metrics().registration_observer(),
                &stop,
            )
        };
        let mut registration_socket = registry.as_deref().map(start_registration_socket);

        let mut kubelet_inode = inode(&kubelet_socket);
        // The plugin watcher comes to us; only kubelet.sock needs a call.
        let mut need_register = registry.is_none();
        let mut retry = tokio::time::Instant::now();
        let mut warned_no_kubelet = false;
        let reason = loop {
            if need_register && tokio::time::Instant::now() >= retry {
                // A restarting kubelet deletes our socket before it serves
                // again: serve a fresh socket first, or the kubelet's dial-back fails.
                if inode(&path) != our_inode {
                    break Some("our socket was removed");
                }
                match register(&dir, &resource).await {
                    Ok(()) => {
                        need_register = false;
                        warned_no_kubelet = false;
                        backoff.reset();
                        kubelet_inode = inode(&kubelet_socket);
                        registered.send_replace(true);
                        resource.metrics().registration(&name, true);
                        tracing::info!(resource = %name, "registered with the kubelet");
                    }
                    Err(RegisterError::NoKubelet(path)) => {
                        // Nothing to back off from: the folder watcher (or
                        // the once-a-second check) says when it appears.
                        registered.send_replace(false);
                        retry = tokio::time::Instant::now() + NO_KUBELET_RECHECK;
                        if warned_no_kubelet {
                            tracing::debug!(resource = %name, socket = %path.display(), "still waiting for the kubelet");
                        } else {
                            tracing::info!(resource = %name, socket = %path.display(), "waiting for the kubelet to create its socket");
                            warned_no_kubelet = true;
                        }
                    }
                    Err(error) => {
                        registered.send_replace(false);
                        resource.metrics().registration(&name, false);
                        let wait = backoff.step();
                        retry = tokio::time::Instant::now() + wait;
                        // The first refusal after a kubelet start is the
                        // usual race with its listen(); say so only if it lasts.
                        if wait >= Backoff::QUIET {
                            tracing::warn!(resource = %name, %error, "registration failed; retrying in {wait:?}");
                        } else {
                            tracing::debug!(resource = %name, %error, "registration failed; retrying in {wait:?}");
                        }
                    }
                }
            }
            let retry_at = retry;
            tokio::select! {
                _ = stop.cancelled() => break None,
                event = events.recv() => match event {
                    Ok(FolderEvent::KubeletSocketCreated) if registry.is_some() => {}
                    Ok(FolderEvent::KubeletSocketCreated) => {
                        // Events can arrive after we already registered with
                        // that very kubelet; only a new kubelet.sock counts.
                        if need_register || inode(&kubelet_socket) != kubelet_inode {
                            tracing::info!(resource = %name, "kubelet.sock created: registering again");
                            need_register = true;
                            backoff.reset();
                            retry = tokio::time::Instant::now();
                        }
                    }
                    Ok(FolderEvent::Removed(file)) if file == socket => {
                        if inode(&path) != our_inode {
                            break Some("our socket was removed");
                        }
                    }
                    Ok(FolderEvent::Removed(_)) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        if inode(&path) != our_inode {
                            break Some("our socket was removed");
                        }
                        need_register = registry.is_none();
                    }
                    Err(broadcast::error::RecvError::Closed) => break None,
                },
                _ = reregister.notified() => {
                    if resource.spec().config.socket != socket {
                        break Some("the socket name changed");
                    }
                    if let Some(registry) = &registry {
                        // The kubelet reads the options when it connects:
                        // a new registration socket makes it connect again.
                        if let Some(old) = registration_socket.take() {
                            old.stop().await;
                        }
                        registration_socket = Some(start_registration_socket(registry));
                    } else {
                        need_register = true;
                        retry = tokio::time::Instant::now();
                    }
                }
                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                    if inode(&path) != our_inode {
                        break Some("our socket was removed");
                    }
                    let now = inode(&kubelet_socket);
                    if registry.is_none() && now.is_some() && now != kubelet_inode {
                        tracing::info!(resource = %name, "kubelet.sock replaced: registering again");
                        need_register = true;
                        backoff.reset();
                        kubelet_inode = now;
                        retry = tokio::time::Instant::now();
                    }
                }
                _ = tokio::time::sleep_until(retry_at), if need_register => {}
            }
        };
        // The registration socket goes first: the kubelet deregisters.
        if let Some(socket) = registration_socket.take() {
            socket.stop().await;
        }
        registered.send_replace(false);
        // Unlink first so nothing new connects, then end the streams.
        if reason.is_none() && inode(&path) == our_inode {
            let _ = std::fs::remove_file(&path);
        }
        server_stop.cancel();
        match server.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(resource = %name, %error, "server ended with an error")
            }
            Err(error) => tracing::warn!(resource = %name, %error, "server task failed"),
        }
        match reason {
            Some(reason) => {
                tracing::info!(resource = %name, reason, "serving again");
                if reason == "the socket name changed" && inode(&path) == our_inode {
                    let _ = std::fs::remove_file(&path);
                }
            }
            None => {
                tracing::info!(resource = %name, "stopped");
                return;
            }
        }
    }
}

/// One `Register` call to the kubelet in `dir`.
pub async fn register(dir: &Path, resource: &Resource) -> Result<(), RegisterError> {
    let path = dir.join(v1beta1::KUBELET_SOCKET);
    if !path.exists() {
        return Err(RegisterError::NoKubelet(path));
    }
    let channel = wdp_kubelet_api::connect_unix(path.clone())
        .await
        .map_err(|source| RegisterError::Connect { path, source })?;
    let spec = resource.spec();
    let request = RegisterRequest {
        version: v1beta1::VERSION.to_owned(),
        endpoint: spec.config.socket.clone(),
        resource_name: spec.config.resource.clone(),
        options: Some(crate::wire::plugin_options(&spec)),
    };
    // The kubelet dials back with a 10 s limit inside Register.
    let limit = Duration::from_secs(30);
    match tokio::time::timeout(limit, RegistrationClient::new(channel).register(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(status)) => Err(RegisterError::Refused(Box::new(status))),
        Err(_) => Err(RegisterError::Timeout(limit)),
    }
}
