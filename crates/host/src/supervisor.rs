//! The whole host: every resource of the config directory served and
//! registered (through the device-plugin API, or as a DRA driver,
//! [`crate::dra`]), the device-plugin folder watched for kubelet restarts, the
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
use crate::dra::driver::{DraDriver, DriverPaths};
use crate::dra::kube_api::DraApi;
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
}

/// The default `plugins_dir`.
pub const DEFAULT_PLUGINS_DIR: &str = wdp_kubelet_api::dra::PLUGINS_PATH;
/// The default `state_dir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/wasm-device-plugin";

/// How a running resource is served to the kubelet.
pub(crate) enum Serving {
    /// A device-plugin socket and its registration.
    DevicePlugin(ServerHandle),
    /// A DRA driver.
    Dra(DraDriver),
}

/// A served resource and the tasks that serve it.
pub(crate) struct Running {
    pub(crate) resource: Arc<Resource>,
    pub(crate) serving: Serving,
    refresher: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops refreshing and serving; the sockets go.
    pub(crate) async fn stop(self) {
        self.refresher.abort();
        match self.serving {
            Serving::DevicePlugin(server) => server.stop().await,
            Serving::Dra(driver) => driver.stop().await,
        }
    }

    /// Stops it for good (the resource left the configuration): as
    /// [`stop`](Self::stop), and a DRA driver's slices are deleted.
    pub(crate) async fn withdraw(self) {
        match self.serving {
            Serving::Dra(driver) => {
                self.refresher.abort();
                driver.withdraw().await;
            }
            serving @ Serving::DevicePlugin(_) => Running { serving, ..self }.stop().await,
        }
    }

    /// Whether the kubelet accepted the resource's registration.
    pub(crate) fn is_registered(&self) -> bool {
        match &self.serving {
            Serving::DevicePlugin(server) => server.is_registered(),
            Serving::Dra(driver) => driver.is_registered(),
        }
    }

    /// Registers again (device-plugin options changed); a DRA driver's
    /// registration carries nothing a reload changes.
    pub(crate) fn reregister(&self) {
        if let Serving::DevicePlugin(server) = &self.serving {
            server.reregister();
        }
    }

    /// The DRA driver serving the resource, if it is one.
    pub(crate) fn dra(&self) -> Option<&DraDriver> {
        match &self.serving {
            Serving::Dra(driver) => Some(driver),
            Serving::DevicePlugin(_) => None,
        }
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
    /// The API server for DRA drivers; `None` until a DRA resource is
    /// first served (the API client is made only then).
    pub(crate) dra_api: Mutex<Option<DraApi>>,
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
        check_dra_setup(&options, &config)?;
        let dra_api = match config.dra_resources().next() {
            Some((_, first)) => Some(crate::dra::kube_api::connect(&options, &first.file).await?),
            None => None,
        };
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
            dra_api: Mutex::new(dra_api),
            config: Mutex::new(config),
            last_error: watch::Sender::new(None),
            previous_builds: std::sync::Mutex::default(),
            watchers: std::sync::Mutex::new(vec![config_watcher]),
        });
        host.watch_plugin_dir()?;
        {
            let mut running = host.running.lock().await;
            for (resource, _) in resources {
                let launched = host.launch(resource).await?;
                running.insert(launched.resource.name().to_owned(), launched);
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
    /// plugin-watcher path: its `NotifyRegistrationStatus` said so), and
    /// every DRA driver's ResourceSlices are published.
    pub async fn ready(&self) -> bool {
        self.not_ready().await.is_empty()
    }

    /// One line per resource that is not ready, saying why: a device-plugin
    /// resource not registered yet; a DRA driver not registered or whose
    /// slices are not published (with the API server's error). Device-plugin
    /// resources never depend on the API server.
    pub async fn not_ready(&self) -> Vec<String> {
        let running = self.running.lock().await;
        running
            .iter()
            .filter_map(|(name, r)| match r.dra() {
                Some(driver) => driver.readiness().err().map(|why| format!("{name}: {why}")),
                None => (!r.is_registered()).then(|| format!("{name}: not registered yet")),
            })
            .collect()
    }

    /// Per DRA resource: its driver's slice publishing status.
    pub async fn dra_status(&self) -> BTreeMap<String, (String, wdp_dra_client::PublishStatus)> {
        let running = self.running.lock().await;
        running
            .iter()
            .filter_map(|(name, r)| {
                let driver = r.dra()?;
                Some((
                    name.clone(),
                    (
                        driver.driver().to_owned(),
                        driver.publish_status().borrow().clone(),
                    ),
                ))
            })
            .collect()
    }

    /// Per resource: registered, and the current device set.
    pub async fn status(&self) -> BTreeMap<String, (bool, Arc<DeviceSet>)> {
        let running = self.running.lock().await;
        running
            .iter()
            .map(|(name, r)| (name.clone(), (r.is_registered(), r.resource.devices())))
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

    /// Serves `resource` the way its config says: a device-plugin socket,
    /// or a DRA driver (the API client is made on the first one).
    pub(crate) async fn launch(&self, resource: Arc<Resource>) -> Result<Running, HostError> {
        let driver = resource.spec().config.driver.clone();
        let serving = match driver {
            None => Serving::DevicePlugin(ServerHandle::start(
                resource.clone(),
                self.options.device_plugin_dir.clone(),
                (self.registration == RegistrationPath::PluginWatcher)
                    .then(|| self.options.plugins_registry_dir.clone()),
                &self.events,
                &self.shutdown,
            )),
            Some(driver) => {
                let api = {
                    let mut api = self.dra_api.lock().await;
                    match &*api {
                        Some(existing) => existing.clone(),
                        None => api
                            .insert(
                                crate::dra::kube_api::connect(
                                    &self.options,
                                    &resource.spec().config.file,
                                )
                                .await?,
                            )
                            .clone(),
                    }
                };
                Serving::Dra(DraDriver::start(
                    resource.clone(),
                    &driver,
                    &self.driver_paths(),
                    &api,
                    &self.shutdown,
                ))
            }
        };
        let refresher = tokio::spawn(resource.clone().refresh_loop(self.shutdown.clone()));
        Ok(Running {
            resource,
            serving,
            refresher,
        })
    }

    /// Where DRA drivers live on this node.
    pub(crate) fn driver_paths(&self) -> DriverPaths {
        DriverPaths {
            plugins_dir: self.options.plugins_dir.clone(),
            plugins_registry_dir: self.options.plugins_registry_dir.clone(),
            cdi_dir: self.options.cdi_dir.clone(),
            state_dir: self.options.state_dir.clone(),
            node_name: self.options.node_name.clone(),
        }
    }

    /// Whether the DRA driver serving resource `name` is registered with
    /// the kubelet; `None` when it is not a DRA resource.
    pub async fn dra_registered(&self, name: &str) -> Option<bool> {
        let running = self.running.lock().await;
        running
            .get(name)
            .and_then(Running::dra)
            .map(DraDriver::is_registered)
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

/// When a DRA resource is configured: the node name is known, the plugins
/// registry folder exists, the plugins and state folders can be created,
/// and every driver's sockets fit a Unix socket address.
pub(crate) fn check_dra_setup(options: &HostOptions, config: &ConfigSet) -> Result<(), HostError> {
    let drivers: Vec<(&str, &crate::config::ResourceConfig)> = config.dra_resources().collect();
    let Some((_, first)) = drivers.first() else {
        return Ok(());
    };
    if options.node_name.is_empty() {
        return Err(HostError::Dra {
            file: first.file.clone(),
            problem: "a DRA resource needs this node's name (--node-name or NODE_NAME) to publish its ResourceSlices".to_owned(),
        });
    }
    check_plugin_dir(&options.plugins_registry_dir)?;
    crate::cdi::check_dir(&options.cdi_dir).map_err(|source| HostError::CdiDir {
        dir: options.cdi_dir.clone(),
        source,
    })?;
    for dir in [&options.plugins_dir, &options.state_dir] {
        std::fs::create_dir_all(dir).map_err(|source| HostError::PluginDir {
            dir: dir.clone(),
            source,
        })?;
    }
    for (driver, resource) in drivers {
        for path in [
            options
                .plugins_dir
                .join(driver)
                .join(wdp_kubelet_api::dra::DRA_SOCKET),
            options
                .plugins_registry_dir
                .join(crate::plugin_watcher::dra_registration_socket_name(driver)),
        ] {
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
    }
    Ok(())
}

/// Every resource's registration socket must fit a Unix socket address in
/// the plugins registry folder.
pub(crate) fn check_registration_socket_paths(
    dir: &Path,
    config: &ConfigSet,
) -> Result<(), HostError> {
    for resource in config.device_plugin_resources() {
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
