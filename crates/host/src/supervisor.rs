//! The whole host: every resource of the config directory served and
//! registered (through the device-plugin API, or as a DRA driver,
//! `wdp-dra-driver`), the device-plugin folder watched for kubelet restarts, the
//! config directory watched for live reloads ([`crate::reload`]); its
//! shutdown is in `crate::shutdown`. What changes while it runs is one
//! [`HostState`] behind one lock (`crate::state` says when it is held).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, broadcast, watch};
use tokio_util::sync::CancellationToken;
use wdp_config::ConfigSet;
use wdp_device_plugin::{FolderEvent, ServerHandle};
use wdp_dra_driver::DraDriver;
use wdp_hardware::HostRoot;
use wdp_kubelet_socket::RegistrationPath;
use wdp_policy::PolicyEngine;
use wdp_resource::ms;
use wdp_resource::{DeviceSet, Resource};

use crate::config_sets;
use crate::error::HostError;
use crate::metrics::Metrics;
use crate::options::HostOptions;
use crate::preflight;
use crate::reload::{self, PlanInputs, ReloadPlan, ReloadSummary};
use crate::running::{Running, Serving, builds_in_use};
use crate::start_config;
use crate::state::HostState;
use crate::watch::{ChangeEvents, watch_config_dir, watch_plugin_dir};

/// The running host.
pub struct Host {
    pub(crate) options: HostOptions,
    /// The registration path chosen at start.
    registration: RegistrationPath,
    pub(crate) root: HostRoot,
    pub(crate) engine: Arc<PolicyEngine>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) events: broadcast::Sender<FolderEvent>,
    pub(crate) shutdown: CancellationToken,
    /// Everything that changes while the host runs; held only for a
    /// transition (see `crate::state`).
    pub(crate) state: Mutex<HostState>,
    /// Serialises reloads (reading, planning, applying); guards no data.
    pub(crate) reloads: Mutex<()>,
    /// Woken after each reload of the config directory, so the label's
    /// set, refused before, is tried again.
    pub(crate) set_files_changed: Arc<tokio::sync::Notify>,
    /// Last reload error, for `/readyz` and logs; `None` when the latest
    /// directory content is being served.
    pub(crate) last_error: watch::Sender<Option<String>>,
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
    /// Device-plugin resources are served and registered while their first
    /// scan runs (their `ListAndWatch` waits for it). A refused
    /// configuration serves the last good one when one was kept
    /// (`crate::start_config`); otherwise, or when a scan fails, nothing
    /// stays served and the start fails.
    pub async fn start(
        options: HostOptions,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, HostError> {
        preflight::check_plugin_dir(&options.device_plugin_dir)?;
        let registration = options.registration.resolve(&options.plugins_registry_dir);
        if registration == RegistrationPath::PluginWatcher {
            preflight::check_plugin_dir(&options.plugins_registry_dir)?;
        }
        // Watch before the first read, so no edit can slip in between.
        let (config_watcher, config_events) = watch_config_dir(&options.config_dir)?;
        // The node's configuration, or the last good one when it is refused.
        let root = HostRoot::new(&options.host_root);
        let chosen = start_config::choose(&options, registration, &root, &metrics).await?;
        let (config, engine, resources) = (chosen.config, chosen.engine, chosen.resources);
        let dra_api = match config.dra_resources().next() {
            Some((_, first)) => {
                Some(crate::dra_api::connect(options.kubeconfig.as_deref(), &first.file).await?)
            }
            None => None,
        };

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
            state: Mutex::new(HostState::new(config, dra_api, config_watcher)),
            reloads: Mutex::new(()),
            set_files_changed: Arc::default(),
            last_error: watch::Sender::new(None),
        });
        let watcher = watch_plugin_dir(
            &host.options.device_plugin_dir,
            host.events.clone(),
            host.metrics.clone(),
        )?;
        host.state.lock().await.watchers.push(watcher);
        let served_early = host.serve_during_first_scans(&resources).await?;
        host.metrics.host.reload(chosen.refused.is_none());
        host.launch_all(resources, served_early).await?;
        host.started(chosen.refused).await;
        host.reload_on_change(config_events);
        host.follow_set_label().await;
        Ok(host)
    }

    /// Serves and registers the device-plugin resources with no handover
    /// to resume while the first scans run, as the kubelet's own plugins
    /// do: their `ListAndWatch` waits for the scan. A scan that fails
    /// takes them down again and fails the start.
    async fn serve_during_first_scans(
        &self,
        resources: &[Arc<Resource>],
    ) -> Result<BTreeMap<String, ServerHandle>, HostError> {
        let mut served_early = BTreeMap::new();
        let unserved = self.unserved_checkpoints().await;
        for resource in resources {
            if resource.spec().config.driver.is_none() && !self.may_resume(resource, &unserved) {
                let server = self.device_plugin_server(resource.clone());
                served_early.insert(resource.name().to_owned(), server);
            }
        }
        if let Err(error) = first_scans(resources).await {
            for server in served_early.into_values() {
                server.stop().await;
            }
            return Err(error);
        }
        Ok(served_early)
    }

    /// Puts every resource in service: those `served_early` as they are,
    /// the others once the handover they need is resumed; the set served
    /// counted. On an error nothing started so far stays served. Holds the
    /// state throughout (see `crate::state`).
    async fn launch_all(
        self: &Arc<Self>,
        resources: Vec<Arc<Resource>>,
        mut served_early: BTreeMap<String, ServerHandle>,
    ) -> Result<(), HostError> {
        let mut state = self.state.lock().await;
        let state = &mut *state;
        self.metrics.host.set_config_set(
            config_sets::shown(state.config.set.as_deref()),
            &state.config.digest,
        );
        for resource in resources {
            let name = resource.name().to_owned();
            let launched = match served_early.remove(&name) {
                Some(server) => self.running(resource, Serving::DevicePlugin(server)),
                None => {
                    let launched = match self.resume_handover(state, &name, &resource).await {
                        Ok(()) => self.launch(state, resource).await,
                        Err(error) => Err(error),
                    };
                    match launched {
                        Ok(launched) => launched,
                        Err(error) => {
                            self.shutdown.cancel();
                            return Err(error);
                        }
                    }
                }
            };
            state.running.insert(name, launched);
        }
        Ok(())
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
        let state = self.state.lock().await;
        state
            .running
            .iter()
            .filter_map(|(name, r)| match r.dra() {
                Some(driver) => driver.readiness().err().map(|why| format!("{name}: {why}")),
                None => (!r.is_registered()).then(|| format!("{name}: not registered yet")),
            })
            .collect()
    }

    /// Per DRA resource: its driver's slice publishing status.
    pub async fn dra_status(&self) -> BTreeMap<String, (String, wdp_dra_driver::PublishStatus)> {
        let state = self.state.lock().await;
        state
            .running
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
        let state = self.state.lock().await;
        state
            .running
            .iter()
            .map(|(name, r)| (name.clone(), (r.is_registered(), r.resource.devices())))
            .collect()
    }

    /// The served resource named `name`.
    pub async fn resource(&self, name: &str) -> Option<Arc<Resource>> {
        let state = self.state.lock().await;
        state.running.get(name).map(|r| r.resource.clone())
    }

    /// The error of the latest refused reload, if the latest content of the
    /// config directory is not what is being served.
    pub fn last_reload_error(&self) -> watch::Receiver<Option<String>> {
        self.last_error.subscribe()
    }

    /// Whether the DRA driver serving resource `name` is registered with
    /// the kubelet; `None` when it is not a DRA resource.
    pub async fn dra_registered(&self, name: &str) -> Option<bool> {
        let state = self.state.lock().await;
        state
            .running
            .get(name)
            .and_then(Running::dra)
            .map(DraDriver::is_registered)
    }
}

impl Host {
    /// Re-reads the config directory and applies what changed. On any
    /// error nothing changes and the error is returned (and logged, and
    /// counted).
    pub async fn reload(&self) -> Result<ReloadSummary, HostError> {
        let before = self.config_content().await;
        let result = self.try_reload(None).await;
        match &result {
            Ok(summary) => {
                self.metrics.host.reload(true);
                self.last_error.send_replace(None);
                if summary.is_empty() {
                    tracing::debug!("config directory unchanged");
                } else {
                    tracing::info!(added = ?summary.added, removed = ?summary.removed, updated = ?summary.updated, switched_api = ?summary.switched, "configuration reloaded");
                }
            }
            Err(error) => {
                let set = self.config_set().await;
                if self.refused(set.as_deref(), before, error).await {
                    tracing::error!(%error, "configuration refused; the last good configuration keeps serving");
                }
            }
        }
        result
    }

    /// [`reload`](Self::reload) without the logging and counting, of the
    /// set being served, or of set `switch` (`Some(None)`: the default).
    pub(crate) async fn try_reload(
        &self,
        switch: Option<Option<String>>,
    ) -> Result<ReloadSummary, HostError> {
        let started = Instant::now();
        let _reloading = self.reloads.lock().await;
        let set = match switch {
            Some(set) => set,
            None => self.config_set().await,
        };
        let new_config = self.read_config(set).await?;
        tracing::debug!(elapsed_ms = ms(started), "reload: config directory parsed");
        // Load guests and dry-run every changed resource before touching
        // anything.
        let plan = self.plan(&new_config, started).await?;
        let (summary, served) = {
            let mut state = self.state.lock().await;
            let state = &mut *state;
            let builds_before = builds_in_use(state.running.values());
            let summary = self.apply(state, plan).await?;
            // Compiled builds neither this configuration nor the one before
            // the latest change uses go: memory stays bounded however many
            // edits a guest sees, and reverting the latest edit finds its
            // builds compiled.
            state.keep_builds(builds_before, &self.engine);
            self.metrics.host.set_config_set(
                config_sets::shown(new_config.set.as_deref()),
                &new_config.digest,
            );
            state.config = new_config.clone();
            (summary, start_config::served_guests(&state.running))
        };
        start_config::keep(&self.options, new_config, served).await;
        tracing::debug!(elapsed_ms = ms(started), "reload: applied");
        if !summary.added.is_empty() || !summary.updated.is_empty() {
            // Loading (and compiling, for a new guest) ran code serving does
            // not run again: let its pages go, once the new state serves.
            tokio::task::spawn_blocking(wdp_memory::release_unused_code_pages);
        }
        Ok(summary)
    }

    /// Reads configuration set `set` of the config directory (`None`: the
    /// default) and checks it against the node's folders.
    async fn read_config(&self, set: Option<String>) -> Result<ConfigSet, HostError> {
        let dir = self.options.config_dir.clone();
        let config =
            tokio::task::spawn_blocking(move || wdp_config::load_set(&dir, set.as_deref()))
                .await
                .map_err(HostError::Task)??;
        config.check_socket_paths(&self.options.device_plugin_dir)?;
        preflight::check_cdi_dir(&self.options.cdi_dir, &config)?;
        preflight::check_dra_setup(&self.options, &config)?;
        if self.registration_path() == RegistrationPath::PluginWatcher {
            preflight::check_registration_socket_paths(
                &self.options.plugins_registry_dir,
                &config,
            )?;
        }
        Ok(config)
    }

    /// Loads the guests of `config` and dry-runs every changed resource
    /// (see [`reload::plan`]); nothing served changes.
    async fn plan(&self, config: &ConfigSet, started: Instant) -> Result<ReloadPlan, HostError> {
        let running: BTreeMap<String, Arc<Resource>> = self
            .state
            .lock()
            .await
            .running
            .iter()
            .map(|(k, v)| (k.clone(), v.resource.clone()))
            .collect();
        let inputs = PlanInputs {
            engine: self.engine.clone(),
            root: self.root.clone(),
            metrics: self.metrics.clone(),
            cdi_dir: self.options.cdi_dir.clone(),
        };
        let config = config.clone();
        tokio::task::spawn_blocking(move || reload::plan(&inputs, &config, &running, started))
            .await
            .map_err(HostError::Task)?
    }

    /// Applies `plan` to the running resources of `state`: removed ones
    /// withdrawn (a DRA driver keeps draining its claims), new ones
    /// launched, changed ones swapped in place (registered again when their
    /// registration changed).
    async fn apply(
        &self,
        state: &mut HostState,
        plan: ReloadPlan,
    ) -> Result<ReloadSummary, HostError> {
        let ReloadPlan { specs, mut fresh } = plan;
        let mut summary = ReloadSummary::default();
        let gone: Vec<String> = state
            .running
            .keys()
            .filter(|k| !specs.contains_key(*k))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = state.running.remove(&name) {
                self.remove(state, &name, r).await;
                summary.removed.push(name);
            }
        }
        for (name, spec) in specs {
            if let Some(resource) = fresh.remove(&name) {
                match state.running.remove(&name) {
                    // Served before under the other API.
                    Some(old) => {
                        let switched = self.switch_api(state, &name, old, resource).await?;
                        state.running.insert(name.clone(), switched);
                        summary.switched.push(name);
                    }
                    None => {
                        let launched = self.launch(state, resource).await?;
                        state.running.insert(name.clone(), launched);
                        summary.added.push(name);
                    }
                }
                continue;
            }
            let Some(r) = state.running.get(&name) else {
                continue;
            };
            let old = r.resource.spec();
            if old.same_as(&spec) {
                summary.unchanged.push(name);
                continue;
            }
            // The same resource read from another set's files: its new
            // paths are taken, and it is not named as updated.
            if old.serves_as(&spec) {
                r.resource.replace_spec(spec);
                summary.unchanged.push(name);
                continue;
            }
            let reregister = spec.config.registration_differs(&old.config);
            if let Some(driver) = r.dra()
                && spec.config.publish_interval != old.config.publish_interval
            {
                driver.set_publish_interval(spec.config.publish_interval);
            }
            r.resource.replace_spec(spec);
            if reregister {
                r.reregister();
            }
            summary.updated.push(name);
        }
        Ok(summary)
    }

    /// Stops serving resource `name`, which left the configuration.
    async fn remove(&self, state: &mut HostState, name: &str, r: Running) {
        self.end_handover(state, name).await;
        if let Some(driver) = r.dra() {
            self.metrics.dra.forget_driver(name, driver.driver());
        }
        if let Some(draining) = r.withdraw().await {
            state.draining.push(draining);
        }
        self.metrics.forget_resource(name);
        // Its CDI spec goes with it (a no-op when it wrote none).
        if let Err(error) = wdp_cdi::remove(&self.options.cdi_dir, name) {
            tracing::warn!(resource = %name, %error, "cannot remove the CDI spec");
        }
    }

    /// Reloads after a quiet period following any change in the config
    /// directory (ConfigMap `..data` swaps included).
    pub(crate) fn reload_on_change(self: &Arc<Self>, mut events: ChangeEvents) {
        let host = Arc::downgrade(self);
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    event = events.recv() => if event.is_none() { return },
                }
                let Some(strong) = host.upgrade() else { return };
                let first_event = Instant::now();
                let debounce =
                    Duration::from_millis(strong.state.lock().await.config.host.reload_debounce_ms);
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
                tracing::debug!(
                    since_first_event_ms = ms(first_event),
                    "reload: config directory quiet; reloading"
                );
                if strong.reload().await.is_ok() {
                    strong.follow_set_label().await;
                }
                // Whatever the current set's outcome, the set the label
                // names may load now.
                strong.set_files_changed.notify_waiters();
            }
        });
    }
}

/// The first discovery and health of every resource, each checked
/// publishable, its warnings logged; the first error, naming the file,
/// guest and hook, ends it.
async fn first_scans(resources: &[Arc<Resource>]) -> Result<(), HostError> {
    let resources = resources.to_vec();
    tokio::task::spawn_blocking(move || {
        for resource in &resources {
            let warnings = resource.first_scan()?;
            reload::check_publishable(&resource.spec(), &resource.devices())?;
            for warning in warnings {
                tracing::warn!(resource = %resource.name(), %warning, "hardware scan");
            }
        }
        Ok(())
    })
    .await
    .map_err(HostError::Task)?
}
