//! The whole host: every resource of the config directory served and
//! registered, the device-plugin folder watched for kubelet restarts, the
//! config directory watched for live reloads ([`crate::reload`]), and an
//! orderly shutdown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{Mutex, broadcast, watch};
use tokio_util::sync::CancellationToken;
use wdp_hardware::HostRoot;
use wdp_kubelet_api::v1beta1;
use wdp_policy::PolicyEngine;

use crate::config::{self, ConfigSet};
use crate::device_set::DeviceSet;
use crate::error::HostError;
use crate::limits::MAX_SOCKET_PATH_BYTES;
use crate::metrics::Metrics;
use crate::plugin_watcher::{RegistrationMode, RegistrationPath, registration_socket_name};
use crate::reload::{new_engine, prepare, watch_config_dir};
use crate::resource::Resource;
use crate::server::{FolderEvent, ServerHandle};

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
}

/// A served resource and the tasks that serve it.
pub(crate) struct Running {
    pub(crate) resource: Arc<Resource>,
    pub(crate) server: ServerHandle,
    refresher: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops refreshing and serving; the socket goes.
    pub(crate) async fn stop(self) {
        self.refresher.abort();
        self.server.stop().await;
    }
}

/// The running host.
pub struct Host {
    pub(crate) options: HostOptions,
    /// The registration path chosen at start.
    registration: RegistrationPath,
    pub(crate) root: HostRoot,
    pub(crate) engine: Arc<PolicyEngine>,
    pub(crate) metrics: Arc<Metrics>,
    events: broadcast::Sender<FolderEvent>,
    pub(crate) shutdown: CancellationToken,
    pub(crate) running: Mutex<BTreeMap<String, Running>>,
    /// The configuration being served; held during a reload.
    pub(crate) config: Mutex<ConfigSet>,
    /// Last reload error, for `/readyz` and logs; `None` when the latest
    /// directory content is being served.
    pub(crate) last_error: watch::Sender<Option<String>>,
    /// Content hashes of the guests the configuration before the current
    /// one used: a reload keeps them compiled, so reverting is a cache hit.
    pub(crate) previous_builds: std::sync::Mutex<std::collections::BTreeSet<String>>,
    watchers: std::sync::Mutex<Vec<notify::RecommendedWatcher>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// Validates everything, then serves and registers every resource.
    /// Nothing is served when any part of the configuration is bad.
    pub async fn start(
        options: HostOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, HostError> {
        check_plugin_dir(&options.device_plugin_dir)?;
        let registration = options.registration.resolve(&options.plugins_registry_dir);
        if registration == RegistrationPath::PluginWatcher {
            check_plugin_dir(&options.plugins_registry_dir)?;
        }
        // Watch before the first read, so no edit can slip in between.
        let (config_watcher, config_events) = watch_config_dir(&options.config_dir)?;
        let dir = options.config_dir.clone();
        let config = tokio::task::spawn_blocking(move || config::load_dir(&dir))
            .await
            .map_err(HostError::Task)??;
        config.check_socket_paths(&options.device_plugin_dir)?;
        check_cdi_dir(&options.cdi_dir, &config)?;
        if registration == RegistrationPath::PluginWatcher {
            check_registration_socket_paths(&options.plugins_registry_dir, &config)?;
        }
        let engine = new_engine(&config)?;
        let root = HostRoot::new(&options.host_root);
        let resources = {
            let (engine, config, root, metrics) = (
                engine.clone(),
                config.clone(),
                root.clone(),
                metrics.clone(),
            );
            let cdi_dir = options.cdi_dir.clone();
            tokio::task::spawn_blocking(move || {
                prepare(&engine, &config)?
                    .into_values()
                    .map(|spec| {
                        Resource::new(spec, root.clone(), metrics.clone(), Some(cdi_dir.clone()))
                    })
                    .collect::<Result<Vec<_>, HostError>>()
            })
            .await
            .map_err(HostError::Task)??
        };
        for (resource, warnings) in &resources {
            for warning in warnings {
                tracing::warn!(resource = %resource.name(), %warning, "hardware scan");
            }
        }
        metrics.reload(true);

        let (events, _) = broadcast::channel(64);
        tracing::info!(
            path = %registration,
            plugins_registry_dir = %options.plugins_registry_dir.display(),
            "registration path"
        );
        let host = Arc::new(Self {
            options,
            registration,
            root,
            engine,
            metrics,
            events,
            shutdown: CancellationToken::new(),
            running: Mutex::new(BTreeMap::new()),
            config: Mutex::new(config),
            last_error: watch::Sender::new(None),
            previous_builds: std::sync::Mutex::default(),
            watchers: std::sync::Mutex::new(vec![config_watcher]),
        });
        host.watch_plugin_dir()?;
        {
            let mut running = host.running.lock().await;
            for (resource, _) in resources {
                running.insert(resource.name().to_owned(), host.launch(resource));
            }
        }
        host.reload_on_change(config_events);
        Ok(host)
    }

    /// The host's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// What the host was started with.
    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// How resources register with the kubelet.
    pub fn registration_path(&self) -> RegistrationPath {
        self.registration
    }

    /// Every configured resource is registered with the kubelet (on the
    /// plugin-watcher path: its `NotifyRegistrationStatus` said so).
    pub async fn ready(&self) -> bool {
        let running = self.running.lock().await;
        running.values().all(|r| r.server.is_registered())
    }

    /// Per resource: registered, and the current device set.
    pub async fn status(&self) -> BTreeMap<String, (bool, Arc<DeviceSet>)> {
        let running = self.running.lock().await;
        running
            .iter()
            .map(|(name, r)| {
                (
                    name.clone(),
                    (r.server.is_registered(), r.resource.devices()),
                )
            })
            .collect()
    }

    /// The served resource named `name`.
    pub async fn resource(&self, name: &str) -> Option<Arc<Resource>> {
        let running = self.running.lock().await;
        running.get(name).map(|r| r.resource.clone())
    }

    /// The error of the latest refused reload, if the latest content of the
    /// config directory is not what is being served.
    pub fn last_reload_error(&self) -> watch::Receiver<Option<String>> {
        self.last_error.subscribe()
    }

    pub(crate) fn launch(&self, resource: Arc<Resource>) -> Running {
        let server = ServerHandle::start(
            resource.clone(),
            self.options.device_plugin_dir.clone(),
            (self.registration == RegistrationPath::PluginWatcher)
                .then(|| self.options.plugins_registry_dir.clone()),
            &self.events,
            &self.shutdown,
        );
        let refresher = tokio::spawn(resource.clone().refresh_loop(self.shutdown.clone()));
        Running {
            resource,
            server,
            refresher,
        }
    }

    /// Stops every resource: streams end, sockets go.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let mut running = self.running.lock().await;
        for (_, r) in std::mem::take(&mut *running) {
            r.stop().await;
        }
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// Forwards device-plugin folder events to every resource server.
    fn watch_plugin_dir(self: &Arc<Self>) -> Result<(), HostError> {
        let dir = self.options.device_plugin_dir.clone();
        let events = self.events.clone();
        let metrics = self.metrics.clone();
        let fail = |source| HostError::Watch {
            dir: dir.clone(),
            source,
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let Ok(event) = event else { return };
                for path in &event.paths {
                    let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
                        continue;
                    };
                    match event.kind {
                        EventKind::Create(_) if file == v1beta1::KUBELET_SOCKET => {
                            metrics.kubelet_restarts.inc();
                            let _ = events.send(FolderEvent::KubeletSocketCreated);
                        }
                        EventKind::Remove(_)
                        | EventKind::Modify(notify::event::ModifyKind::Name(_)) => {
                            let _ = events.send(FolderEvent::Removed(file.to_owned()));
                        }
                        _ => {}
                    }
                }
            })
            .map_err(fail)?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(fail)?;
        self.watchers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(watcher);
        Ok(())
    }
}

/// When any resource writes CDI specs, the CDI folder must exist (it is
/// created if missing) and accept new files.
pub(crate) fn check_cdi_dir(dir: &Path, config: &ConfigSet) -> Result<(), HostError> {
    if config
        .resources
        .values()
        .all(|r| r.cdi == crate::config::CdiMode::Off)
    {
        return Ok(());
    }
    let fail = |source| HostError::CdiDir {
        dir: dir.to_owned(),
        source,
    };
    crate::cdi::check_dir(dir).map_err(fail)
}

/// Every resource's registration socket must fit a Unix socket address in
/// the plugins registry folder.
pub(crate) fn check_registration_socket_paths(
    dir: &Path,
    config: &ConfigSet,
) -> Result<(), HostError> {
    for resource in config.resources.values() {
        let path = dir.join(registration_socket_name(&resource.socket));
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH_BYTES {
            return Err(HostError::SocketPath {
                file: resource.file.clone(),
                path,
                len,
                max: MAX_SOCKET_PATH_BYTES,
            });
        }
    }
    Ok(())
}

/// The device-plugin folder (and, on the plugin-watcher path, the plugins
/// registry folder) must exist and accept new sockets.
fn check_plugin_dir(dir: &Path) -> Result<(), HostError> {
    let fail = |source| HostError::PluginDir {
        dir: dir.to_owned(),
        source,
    };
    let meta = std::fs::metadata(dir).map_err(fail)?;
    if !meta.is_dir() {
        return Err(fail(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    let probe = dir.join(format!(".wdp-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(fail)?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}
