//! Registering a resource through `kubelet.sock`: the `Register` call and
//! when to make it again.
//!
//! A call is due when the resource's socket is served afresh, when a new
//! `kubelet.sock` appears (a kubelet (re)started: seen as a folder event
//! or, once a second, as a changed inode), and when the resource's options
//! change. A missing `kubelet.sock` is looked for again each second; a
//! kubelet that does not answer is tried again with [`Backoff`], quietly
//! for the first few tries (the usual race with its `listen()`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use wdp_kubelet_api::v1beta1::{self, RegisterRequest, registration_client::RegistrationClient};
use wdp_kubelet_socket::served_socket::inode;
use wdp_kubelet_socket::{Backoff, KubeletMetrics};
use wdp_resource::Resource;

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

/// How often a missing `kubelet.sock` is looked for besides the folder
/// watcher's events.
const NO_KUBELET_RECHECK: Duration = Duration::from_secs(1);

/// When the next `Register` is due for one served socket.
#[derive(Debug)]
pub(crate) struct KubeletRegistration {
    dir: PathBuf,
    kubelet_socket: PathBuf,
    /// The `kubelet.sock` last registered with.
    kubelet_inode: Option<u64>,
    due: Option<Instant>,
    warned_no_kubelet: bool,
    backoff: Backoff,
}

impl KubeletRegistration {
    /// Registration through `<dir>/kubelet.sock`, due at once.
    pub(crate) fn new(dir: &Path) -> Self {
        let kubelet_socket = dir.join(v1beta1::KUBELET_SOCKET);
        Self {
            dir: dir.to_owned(),
            kubelet_inode: inode(&kubelet_socket),
            kubelet_socket,
            due: Some(Instant::now()),
            warned_no_kubelet: false,
            backoff: Backoff::new(),
        }
    }

    /// When the next call is due, if one is.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Calls `Register` now, counted in `metrics`; on failure, says when to
    /// try again.
    pub(crate) async fn attempt(
        &mut self,
        resource: &Resource,
        metrics: &KubeletMetrics,
        registered: &watch::Sender<bool>,
    ) {
        let name = resource.name();
        match register(&self.dir, resource).await {
            Ok(()) => {
                self.due = None;
                self.warned_no_kubelet = false;
                self.backoff.reset();
                self.kubelet_inode = inode(&self.kubelet_socket);
                registered.send_replace(true);
                metrics.registration(name, true);
                tracing::info!(resource = %name, "registered with the kubelet");
            }
            Err(RegisterError::NoKubelet(path)) => {
                // Nothing to back off from: the folder watcher (or the
                // once-a-second check) says when it appears.
                registered.send_replace(false);
                self.due = Some(Instant::now() + NO_KUBELET_RECHECK);
                if self.warned_no_kubelet {
                    tracing::debug!(resource = %name, socket = %path.display(), "still waiting for the kubelet");
                } else {
                    tracing::info!(resource = %name, socket = %path.display(), "waiting for the kubelet to create its socket");
                    self.warned_no_kubelet = true;
                }
            }
            Err(error) => {
                registered.send_replace(false);
                metrics.registration(name, false);
                let wait = self.backoff.step();
                self.due = Some(Instant::now() + wait);
                // The first refusal after a kubelet start is the usual race
                // with its listen(); say so only if it lasts.
                if wait >= Backoff::QUIET {
                    tracing::warn!(resource = %name, %error, "registration failed; retrying in {wait:?}");
                } else {
                    tracing::debug!(resource = %name, %error, "registration failed; retrying in {wait:?}");
                }
            }
        }
    }

    /// The folder watcher saw `kubelet.sock` created. Events can arrive
    /// after we already registered with that very kubelet: only a new
    /// `kubelet.sock` counts.
    pub(crate) fn kubelet_socket_created(&mut self, resource: &str) {
        if self.due.is_some() || inode(&self.kubelet_socket) != self.kubelet_inode {
            tracing::info!(%resource, "kubelet.sock created: registering again");
            self.register_again();
        }
    }

    /// The once-a-second look: a `kubelet.sock` replaced since the last
    /// registration is a kubelet restart the folder watcher missed.
    pub(crate) fn check_kubelet_socket(&mut self, resource: &str) {
        let now = inode(&self.kubelet_socket);
        if now.is_some() && now != self.kubelet_inode {
            tracing::info!(%resource, "kubelet.sock replaced: registering again");
            self.kubelet_inode = now;
            self.register_again();
        }
    }

    /// Registers again at once, backoff reset.
    pub(crate) fn register_again(&mut self) {
        self.backoff.reset();
        self.due = Some(Instant::now());
    }
}

/// One `Register` call to the kubelet in `dir`.
pub(crate) async fn register(dir: &Path, resource: &Resource) -> Result<(), RegisterError> {
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
        options: Some(crate::wire::plugin_options(resource)),
    };
    // The kubelet dials back with a 10 s limit inside Register.
    let limit = Duration::from_secs(30);
    match tokio::time::timeout(limit, RegistrationClient::new(channel).register(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(status)) => Err(RegisterError::Refused(Box::new(status))),
        Err(_) => Err(RegisterError::Timeout(limit)),
    }
}
