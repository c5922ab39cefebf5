//! Live reload of the config directory: watch it, debounce, then apply the
//! new content all or nothing. The new directory is parsed, every changed
//! guest is compiled and smoke-tested and every changed resource's
//! discovery is dry-run first; only then are resources added, removed or
//! swapped. Unchanged resources are left alone.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher};
use wdp_policy::{EngineSettings, PolicyEngine};

use crate::config::{self, ConfigSet};
use crate::error::HostError;
use crate::resource::Resource;
use crate::spec::ResourceSpec;
use crate::supervisor::Host;

/// What a reload changed, by resource name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadSummary {
    /// Resources that appeared.
    pub added: Vec<String>,
    /// Resources that went away.
    pub removed: Vec<String>,
    /// Resources whose config or guests changed.
    pub updated: Vec<String>,
    /// Resources left as they were.
    pub unchanged: Vec<String>,
}

impl ReloadSummary {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty()
    }
}

/// The Wasm engine for a configuration (its precompiled-guest cache).
pub(crate) fn new_engine(config: &ConfigSet) -> Result<Arc<PolicyEngine>, HostError> {
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
        .map_err(HostError::Engine)
}

/// Loads and smoke-tests the guests of every resource. Blocking.
pub(crate) fn prepare(
    engine: &PolicyEngine,
    config: &ConfigSet,
) -> Result<BTreeMap<String, ResourceSpec>, HostError> {
    prepare_changed(engine, config, &BTreeMap::new())
}

/// [`prepare`], except that a resource whose configuration and guest files
/// are those of its `running` spec ([`ResourceSpec::unchanged_for`]) keeps
/// that spec: nothing untouched is loaded, smoke-tested or rediscovered
/// again, whatever else the directory holds. Blocking.
fn prepare_changed(
    engine: &PolicyEngine,
    config: &ConfigSet,
    running: &BTreeMap<String, Arc<Resource>>,
) -> Result<BTreeMap<String, ResourceSpec>, HostError> {
    let mut loaded_any = false;
    let specs = config
        .resources
        .iter()
        .map(|(name, resource)| {
            let started = Instant::now();
            if let Some(existing) = running.get(name) {
                let spec = existing.spec();
                if spec.unchanged_for(resource) {
                    tracing::debug!(resource = %name, elapsed_ms = ms(started), "reload: unchanged, kept");
                    return Ok((name.clone(), ResourceSpec::clone(&spec)));
                }
            }
            loaded_any = true;
            let spec = ResourceSpec::load(engine, resource)?;
            tracing::debug!(resource = %name, elapsed_ms = ms(started), "reload: guests loaded and smoke-tested");
            Ok((name.clone(), spec))
        })
        .collect();
    if loaded_any {
        // A compile frees most of what it allocated; give it back.
        let started = Instant::now();
        wdp_policy::release_free_memory();
        tracing::debug!(elapsed_ms = ms(started), "reload: free memory released");
    }
    specs
}

/// Milliseconds since `started`, for the reload path's timing logs.
fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}

/// Content hashes of the guest builds the `running` resources use.
fn builds_in_use(running: &BTreeMap<String, crate::supervisor::Running>) -> BTreeSet<String> {
    running
        .values()
        .flat_map(|r| {
            r.resource
                .spec()
                .guests
                .values()
                .map(|g| g.content_hash().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One message per change in the config directory.
pub(crate) type ChangeEvents = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Watches the config directory recursively; every change but a mere
/// access sends one message.
pub(crate) fn watch_config_dir(
    dir: &Path,
) -> Result<(notify::RecommendedWatcher, ChangeEvents), HostError> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let fail = |source| HostError::Watch {
        dir: dir.to_owned(),
        source,
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !matches!(event.kind, EventKind::Access(_))
        {
            let _ = tx.send(());
        }
    })
    .map_err(fail)?;
    watcher.watch(dir, RecursiveMode::Recursive).map_err(fail)?;
    Ok((watcher, rx))
}

impl Host {
    /// Re-reads the config directory and applies what changed. On any
    /// error nothing changes and the error is returned (and logged, and
    /// counted).
    pub async fn reload(&self) -> Result<ReloadSummary, HostError> {
        let result = self.try_reload().await;
        match &result {
            Ok(summary) => {
                self.metrics.reload(true);
                self.last_error.send_replace(None);
                if summary.is_empty() {
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
        let started = Instant::now();
        let mut current = self.config.lock().await;
        let dir = self.options.config_dir.clone();
        let new_config = tokio::task::spawn_blocking(move || config::load_dir(&dir))
            .await
            .map_err(HostError::Task)??;
        tracing::debug!(elapsed_ms = ms(started), "reload: config directory parsed");
        new_config.check_socket_paths(&self.options.device_plugin_dir)?;
        crate::supervisor::check_cdi_dir(&self.options.cdi_dir, &new_config)?;
        crate::supervisor::check_dra_setup(&self.options, &new_config)?;
        if self.registration_path() == crate::plugin_watcher::RegistrationPath::PluginWatcher {
            crate::supervisor::check_registration_socket_paths(
                &self.options.plugins_registry_dir,
                &new_config,
            )?;
        }

        // Load guests and dry-run every changed resource before touching
        // anything.
        let running: BTreeMap<String, Arc<Resource>> = self
            .running
            .lock()
            .await
            .iter()
            .map(|(k, v)| (k.clone(), v.resource.clone()))
            .collect();
        let (engine, root, metrics) =
            (self.engine.clone(), self.root.clone(), self.metrics.clone());
        let cdi_dir = self.options.cdi_dir.clone();
        let config_for_prepare = new_config.clone();
        let (specs, mut fresh) = tokio::task::spawn_blocking(move || {
            let specs = prepare_changed(&engine, &config_for_prepare, &running)?;
            tracing::debug!(elapsed_ms = ms(started), "reload: guests prepared");
            let mut fresh: BTreeMap<String, Arc<Resource>> = BTreeMap::new();
            for (name, spec) in &specs {
                match running.get(name) {
                    Some(existing) if existing.spec().same_as(spec) => {}
                    Some(existing) => existing.dry_run(spec)?,
                    None => {
                        let (resource, warnings) = Resource::new(
                            spec.clone(),
                            root.clone(),
                            metrics.clone(),
                            Some(cdi_dir.clone()),
                        )?;
                        for warning in warnings {
                            tracing::warn!(resource = %name, %warning, "hardware scan");
                        }
                        fresh.insert(name.clone(), resource);
                    }
                }
            }
            tracing::debug!(
                elapsed_ms = ms(started),
                "reload: changed resources dry-run"
            );
            Ok::<_, HostError>((specs, fresh))
        })
        .await
        .map_err(HostError::Task)??;

        // Apply.
        let mut summary = ReloadSummary::default();
        let mut running = self.running.lock().await;
        let builds_before = builds_in_use(&running);
        let gone: Vec<String> = running
            .keys()
            .filter(|k| !specs.contains_key(*k))
            .cloned()
            .collect();
        for name in gone {
            if let Some(r) = running.remove(&name) {
                r.withdraw().await;
                self.metrics.forget_resource(&name);
                // Its CDI spec goes with it (a no-op when it wrote none).
                if let Err(error) = crate::cdi::remove(&self.options.cdi_dir, &name) {
                    tracing::warn!(resource = %name, %error, "cannot remove the CDI spec");
                }
                summary.removed.push(name);
            }
        }
        for (name, spec) in specs {
            if let Some(resource) = fresh.remove(&name) {
                running.insert(name.clone(), self.launch(resource).await?);
                summary.added.push(name);
                continue;
            }
            let Some(r) = running.get(&name) else {
                continue;
            };
            let old = r.resource.spec();
            if old.same_as(&spec) {
                summary.unchanged.push(name);
                continue;
            }
            let reregister = spec.config.registration_differs(&old.config);
            r.resource.replace_spec(spec);
            if reregister {
                r.reregister();
            }
            summary.updated.push(name);
        }
        // Compiled builds neither this configuration nor the one before the
        // latest change uses go: memory stays bounded however many edits a
        // guest sees, and reverting the latest edit finds its builds compiled.
        let used = builds_in_use(&running);
        let mut previous = self
            .previous_builds
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if used != builds_before {
            *previous = builds_before;
        }
        self.engine
            .retain_compiled(|hash| used.contains(hash) || previous.contains(hash));
        *current = new_config;
        tracing::debug!(elapsed_ms = ms(started), "reload: applied");
        if !summary.added.is_empty() || !summary.updated.is_empty() {
            // Loading (and compiling, for a new guest) ran code serving does
            // not run again: let its pages go, once the new state serves.
            tokio::task::spawn_blocking(wdp_policy::release_unused_code_pages);
        }
        Ok(summary)
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
                tracing::debug!(
                    since_first_event_ms = ms(first_event),
                    "reload: config directory quiet; reloading"
                );
                let _ = strong.reload().await;
            }
        });
    }
}
