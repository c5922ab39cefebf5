//! The whole host: every resource of the config directory served and
//! registered, the device-plugin folder watched for kubelet restarts, the
//! config directory watched for live reloads, and an orderly shutdown.
//!
//! A reload is all-or-nothing: the new directory is parsed, every changed
//! guest is compiled and smoke-tested and every resource's discovery is
//! dry-run first; only then are resources added, removed or swapped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{Mutex, broadcast, watch};
use tokio_util::sync::CancellationToken;
use wdp_hardware::HostRoot;
use wdp_kubelet_api::v1beta1;
use wdp_policy::{EngineSettings, Guest, Hook, PolicyEngine};

use crate::config::{self, ConfigError, ConfigSet, ResourceConfig};
use crate::devices::DeviceSet;
use crate::metrics::Metrics;
use crate::resource::{DiscoveryError, Resource, ResourceSpec};
use crate::server::{FolderEvent, ServerHandle};

/// Where the host reads and serves.
#[derive(Clone, Debug)]
pub struct HostOptions {
    pub config_dir: PathBuf,
    pub device_plugin_dir: PathBuf,
    pub host_root: PathBuf,
}

/// Anything that stops a configuration from being applied.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("{file}: hook {hook}: guest {guest}: {message}")]
    Guest {
        file: PathBuf,
        hook: Hook,
        guest: PathBuf,
        message: String,
    },
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    #[error("wasm engine: {0}")]
    Engine(String),
    #[error("device-plugin directory {dir}: {problem}")]
    PluginDir { dir: PathBuf, problem: String },
    #[error("cannot watch {dir}: {source}")]
    Watch {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
}

/// What `check` prints for one resource.
#[derive(Clone, Debug)]
pub struct ResourceReport {
    pub resource: String,
    pub file: PathBuf,
    pub socket: String,
    pub pre_start_required: bool,
    pub get_preferred_allocation: bool,
    pub hooks: Vec<(Hook, String)>,
    pub devices: DeviceSet,
    pub warnings: Vec<String>,
}

/// What a reload changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
}

struct Running {
    resource: Arc<Resource>,
    server: ServerHandle,
    refresher: tokio::task::JoinHandle<()>,
}

/// A prepared configuration: specs with guests loaded, resources built.
struct Prepared {
    config: ConfigSet,
    specs: BTreeMap<String, ResourceSpec>,
}

/// The running host.
pub struct Host {
    options: HostOptions,
    root: HostRoot,
    engine: Arc<PolicyEngine>,
    metrics: Arc<Metrics>,
    events: broadcast::Sender<FolderEvent>,
    shutdown: CancellationToken,
    running: Mutex<BTreeMap<String, Running>>,
    config: Mutex<ConfigSet>,
    /// Last reload error, for `/readyz` and logs; `None` when the latest
    /// directory content is being served.
    last_error: watch::Sender<Option<String>>,
    _watchers: std::sync::Mutex<Vec<notify::RecommendedWatcher>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("options", &self.options)
            .finish()
    }
}

fn new_engine(config: &ConfigSet) -> Result<Arc<PolicyEngine>, HostError> {
    let settings = EngineSettings {
        precompiled_cache_dir: config
            .host
            .precompiled_cache_dir
            .as_ref()
            .map(|p| config.dir.join(p)),
        ..EngineSettings::default()
    };
    PolicyEngine::new(settings)
        .map(Arc::new)
        .map_err(|e| HostError::Engine(e.to_string()))
}

/// Loads, checks and smoke-tests the guests of every resource.
fn prepare(engine: &PolicyEngine, config: ConfigSet) -> Result<Prepared, HostError> {
    let mut specs = BTreeMap::new();
    for (name, resource) in &config.resources {
        specs.insert(name.clone(), load_spec(engine, resource)?);
    }
    Ok(Prepared { config, specs })
}

fn load_spec(engine: &PolicyEngine, config: &ResourceConfig) -> Result<ResourceSpec, HostError> {
    let mut guests: BTreeMap<Hook, Arc<Guest>> = BTreeMap::new();
    for binding in &config.hooks {
        let fail = |message: String| HostError::Guest {
            file: config.file.clone(),
            hook: binding.hook,
            guest: binding.guest.clone(),
            message,
        };
        let guest = engine
            .load_file(&binding.guest)
            .map_err(|e| fail(e.to_string()))?;
        if !guest.exports(binding.hook) {
            let exported: Vec<String> = guest.hooks().iter().map(|h| h.to_string()).collect();
            return Err(fail(format!(
                "does not export the {} hook (it exports: {})",
                binding.hook,
                exported.join(", ")
            )));
        }
        let ctx = wdp_policy::CallContext {
            limits: wdp_policy::CallLimits {
                timeout: binding.timeout,
                memory_bytes: binding.memory_limit_bytes,
            },
            services: Arc::new(wdp_policy::NoHardware),
            config: Arc::new(config.guest_config.clone()),
            resource: config.resource.clone(),
        };
        guest
            .smoke_test(&ctx)
            .map_err(|e| fail(format!("failed its smoke test: {e}")))?;
        guests.insert(binding.hook, guest);
    }
    Ok(ResourceSpec {
        config: config.clone(),
        guests,
    })
}

/// Validates a config directory offline and reports what each resource
/// would advertise; the same checks `run` and every reload perform.
pub fn check(config_dir: &Path, host_root: &Path) -> Result<Vec<ResourceReport>, HostError> {
    Ok(load_offline(config_dir, host_root)?
        .into_iter()
        .map(|(resource, warnings)| {
            let spec = resource.spec();
            ResourceReport {
                resource: resource.name().to_owned(),
                file: spec.config.file.clone(),
                socket: spec.config.socket.clone(),
                pre_start_required: spec.config.pre_start_required,
                get_preferred_allocation: spec.config.get_preferred_allocation,
                hooks: spec
                    .guests
                    .iter()
                    .map(|(h, g)| (*h, g.name().to_owned()))
                    .collect(),
                devices: (*resource.devices()).clone(),
                warnings,
            }
        })
        .collect())
}

/// A resource loaded offline, with the warnings of its first hardware scan.
pub type LoadedResource = (Arc<Resource>, Vec<String>);

/// Loads a config directory into resources that are not served: every
/// guest loaded and smoke-tested, discovery and health run once. For
/// `check` and for exercising hooks offline (`test`). Blocking.
pub fn load_offline(config_dir: &Path, host_root: &Path) -> Result<Vec<LoadedResource>, HostError> {
    let config = config::load_dir(config_dir)?;
    let engine = new_engine(&config)?;
    let prepared = prepare(&engine, config)?;
    let root = HostRoot::new(host_root);
    let metrics = Metrics::new();
    prepared
        .specs
        .into_values()
        .map(|spec| Ok(Resource::new(spec, root.clone(), metrics.clone())?))
        .collect()
}

impl Host {
    /// Validates everything, then serves and registers every resource.
    /// Nothing is served when any part of the configuration is bad.
    pub async fn start(
        options: HostOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, HostError> {
        check_plugin_dir(&options.device_plugin_dir)?;
        // Watch before the first read, so no edit can slip in between.
        let (config_watcher, config_events) = watch_config_dir(&options.config_dir)?;
        let config = config::load_dir(&options.config_dir)?;
        let engine = new_engine(&config)?;
        let root = HostRoot::new(&options.host_root);
        let prepared = {
            let engine = engine.clone();
            tokio::task::spawn_blocking(move || prepare(&engine, config))
                .await
                .map_err(|e| HostError::Engine(e.to_string()))??
        };
        let mut resources = Vec::new();
        for spec in prepared.specs.into_values() {
            let root = root.clone();
            let metrics = metrics.clone();
            let (resource, warnings) =
                tokio::task::spawn_blocking(move || Resource::new(spec, root, metrics))
                    .await
                    .map_err(|e| HostError::Engine(e.to_string()))??;
            for warning in warnings {
                tracing::warn!(resource = %resource.name(), %warning, "hardware scan");
            }
            resources.push(resource);
        }
        metrics.reload(true);

        let (events, _) = broadcast::channel(64);
        let host = Arc::new(Self {
            options: options.clone(),
            root,
            engine,
            metrics,
            events,
            shutdown: CancellationToken::new(),
            running: Mutex::new(BTreeMap::new()),
            config: Mutex::new(prepared.config),
            last_error: watch::Sender::new(None),
            _watchers: std::sync::Mutex::new(Vec::new()),
        });
        host.watch_plugin_dir()?;
        {
            let mut running = host.running.lock().await;
            for resource in resources {
                running.insert(resource.name().to_owned(), host.launch(resource));
            }
        }
        host._watchers
            .lock()
            .expect("watchers lock")
            .push(config_watcher);
        host.reload_on_change(config_events);
        Ok(host)
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn options(&self) -> &HostOptions {
        &self.options
    }

    /// Every configured resource is registered with the kubelet.
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

    /// The error of the latest refused reload, if the latest content of the
    /// config directory is not what is being served.
    pub fn last_reload_error(&self) -> watch::Receiver<Option<String>> {
        self.last_error.subscribe()
    }

    fn launch(&self, resource: Arc<Resource>) -> Running {
        let server = ServerHandle::start(
            resource.clone(),
            self.options.device_plugin_dir.clone(),
            &self.events,
            &self.shutdown,
        );
        let refresher = tokio::spawn(refresh_loop(resource.clone(), self.shutdown.clone()));
        Running {
            resource,
            server,
            refresher,
        }
    }

    /// Re-reads the config directory and applies what changed. On any
    /// error nothing changes and the error is returned (and logged, and
    /// counted).
    pub async fn reload(&self) -> Result<ReloadSummary, HostError> {
        let result = self.try_reload().await;
        match &result {
            Ok(summary) => {
                self.metrics.reload(true);
                self.last_error.send_replace(None);
                if summary.added.is_empty()
                    && summary.removed.is_empty()
                    && summary.updated.is_empty()
                {
                    tracing::debug!("config directory unchanged");
                } else {
                    tracing::info!(added = ?summary.added, removed = ?summary.removed, updated = ?summary.updated, "configuration reloaded");
                }
            }
            Err(error) => {
                self.metrics.reload(false);
                self.last_error.send_replace(Some(error.to_string()));
                tracing::error!(%error, "configuration refused; the last good configuration keeps serving");
            }
        }
        result
    }

    async fn try_reload(&self) -> Result<ReloadSummary, HostError> {
        let dir = self.options.config_dir.clone();
        let engine = self.engine.clone();
        let mut current = self.config.lock().await;
        let new_config = tokio::task::spawn_blocking(move || config::load_dir(&dir))
            .await
            .map_err(|e| HostError::Engine(e.to_string()))??;

        // Load guests and dry-run every resource before touching anything.
        let running_snapshot: BTreeMap<String, Arc<Resource>> = {
            let running = self.running.lock().await;
            running
                .iter()
                .map(|(k, v)| (k.clone(), v.resource.clone()))
                .collect()
        };
        let root = self.root.clone();
        let metrics = self.metrics.clone();
        let config_for_prepare = new_config.clone();
        let (prepared, fresh) = tokio::task::spawn_blocking(move || {
            let prepared = prepare(&engine, config_for_prepare)?;
            let mut fresh: BTreeMap<String, Arc<Resource>> = BTreeMap::new();
            for (name, spec) in &prepared.specs {
                match running_snapshot.get(name) {
                    Some(existing) => {
                        existing.dry_run(spec)?;
                    }
                    None => {
                        let (resource, warnings) =
                            Resource::new(spec.clone(), root.clone(), metrics.clone())?;
                        for warning in warnings {
                            tracing::warn!(resource = %name, %warning, "hardware scan");
                        }
                        fresh.insert(name.clone(), resource);
                    }
                }
            }
            Ok::<_, HostError>((prepared, fresh))
        })
        .await
        .map_err(|e| HostError::Engine(e.to_string()))??;

        // Apply.
        let mut summary = ReloadSummary::default();
        let mut running = self.running.lock().await;
        let gone: Vec<String> = running
            .keys()
            .filter(|k| !prepared.specs.contains_key(*k))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                r.refresher.abort();
                r.server.stop().await;
                self.metrics.forget_resource(&name);
                summary.removed.push(name);
            }
        }
        for (name, spec) in prepared.specs {
            if let Some(resource) = fresh.get(&name) {
                running.insert(name.clone(), self.launch(resource.clone()));
                summary.added.push(name);
                continue;
            }
            let r = &running[&name];
            let old = r.resource.spec();
            if old.config == spec.config && same_guests(&old, &spec) {
                summary.unchanged.push(name);
                continue;
            }
            let reregister = spec.config.registration_differs(&old.config);
            r.resource.replace_spec(spec);
            if reregister {
                r.server.reregister();
            }
            summary.updated.push(name);
        }
        *current = new_config;
        Ok(summary)
    }

    /// Stops every resource: streams end, sockets go.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        let mut running = self.running.lock().await;
        for (_, r) in std::mem::take(&mut *running) {
            r.refresher.abort();
            r.server.stop().await;
        }
        self._watchers.lock().expect("watchers lock").clear();
    }

    /// Forwards device-plugin folder events to every resource server.
    fn watch_plugin_dir(self: &Arc<Self>) -> Result<(), HostError> {
        let dir = self.options.device_plugin_dir.clone();
        let events = self.events.clone();
        let metrics = self.metrics.clone();
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
            .map_err(|source| HostError::Watch {
                dir: dir.clone(),
                source,
            })?;
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| HostError::Watch { dir, source })?;
        self._watchers.lock().expect("watchers lock").push(watcher);
        Ok(())
    }

    /// Reloads after a quiet period following any change in the config
    /// directory (ConfigMap `..data` swaps included).
    fn reload_on_change(self: &Arc<Self>, mut events: ChangeEvents) {
        let host = Arc::downgrade(self);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    event = events.recv() => if event.is_none() { return },
                }
                let Some(strong) = host.upgrade() else { return };
                let debounce =
                    Duration::from_millis(strong.config.lock().await.host.reload_debounce_ms);
                drop(strong);
                // Quiet period: restart the timer on every further event.
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => return,
                        more = events.recv() => if more.is_none() { return },
                        _ = tokio::time::sleep(debounce) => break,
                    }
                }
                let Some(strong) = host.upgrade() else { return };
                let _ = strong.reload().await;
            }
        });
    }
}

/// One message per change in the config directory.
type ChangeEvents = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Watches the config directory recursively; every change but a mere
/// access sends one message.
fn watch_config_dir(dir: &Path) -> Result<(notify::RecommendedWatcher, ChangeEvents), HostError> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !matches!(event.kind, EventKind::Access(_))
        {
            let _ = tx.send(());
        }
    })
    .map_err(|source| HostError::Watch {
        dir: dir.to_owned(),
        source,
    })?;
    watcher
        .watch(dir, RecursiveMode::Recursive)
        .map_err(|source| HostError::Watch {
            dir: dir.to_owned(),
            source,
        })?;
    Ok((watcher, rx))
}

fn same_guests(a: &ResourceSpec, b: &ResourceSpec) -> bool {
    a.guests.len() == b.guests.len()
        && a.guests.iter().all(|(hook, g)| {
            b.guests
                .get(hook)
                .is_some_and(|h| h.content_hash() == g.content_hash())
        })
}

/// Refreshes discovery and health on every hardware event, poll tick or
/// request.
async fn refresh_loop(resource: Arc<Resource>, shutdown: CancellationToken) {
    let mut changes = resource.hardware_changes();
    loop {
        let interval = resource.spec().config.poll_interval;
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
            _ = resource.refresh_requested() => {}
            alive = async { changes.as_mut()?.changed().await.then_some(()) }, if changes.is_some() => {
                if alive.is_none() {
                    changes = None;
                }
            }
        }
        let r = resource.clone();
        if tokio::task::spawn_blocking(move || r.refresh())
            .await
            .is_err()
        {
            tracing::error!(resource = %resource.name(), "refresh panicked");
        }
    }
}

/// The device-plugin folder must exist and accept new sockets.
fn check_plugin_dir(dir: &Path) -> Result<(), HostError> {
    let meta = std::fs::metadata(dir).map_err(|e| HostError::PluginDir {
        dir: dir.to_owned(),
        problem: e.to_string(),
    })?;
    if !meta.is_dir() {
        return Err(HostError::PluginDir {
            dir: dir.to_owned(),
            problem: "not a directory".to_owned(),
        });
    }
    let probe = dir.join(format!(".wdp-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| HostError::PluginDir {
        dir: dir.to_owned(),
        problem: format!("cannot create files there: {e}"),
    })?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}
