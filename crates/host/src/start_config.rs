//! What a start serves: the node's configuration when it is valid, else
//! the last good snapshot ([`crate::last_good`]), so no configuration
//! mistake takes the node's devices away at start.
//!
//! - The node's configuration (the set `config_sets` picks) is checked
//!   against the node's folders and its guests loaded and smoke-tested
//!   (signatures and pins verified) before anything is served.
//! - When that is refused and a snapshot exists, the snapshot is served
//!   instead, its guests verified against the keys trusted now: an ERROR
//!   names what was refused and what is served, `config_valid` is 0,
//!   `/readyz`'s reload error is set, the opt-in state label reads
//!   `failed`, and a Warning Event (`ConfigurationRefused`) goes on the
//!   node when its name and the API server are known. Each later reload
//!   still refused logs its ERROR; the first one that loads replaces the
//!   snapshot's service as any reload does.
//! - With no snapshot, or the snapshot refused too, or
//!   `--invalid-config-at-start=refuse` ([`HostOptions::serve_last_good`]
//!   off), the start is refused as before.
//! - Every configuration put in service (at start, or by a reload or a
//!   set switch) becomes the snapshot.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use wdp_config::ConfigSet;
use wdp_hardware::HostRoot;
use wdp_kubelet_socket::RegistrationPath;
use wdp_policy::PolicyEngine;
use wdp_resource::Resource;
use wdp_resource::{load_specs, new_engine};

use crate::config_sets;
use crate::error::HostError;
use crate::last_good;
use crate::metrics::Metrics;
use crate::options::HostOptions;
use crate::preflight;
use crate::running::Running;
use crate::supervisor::Host;

/// The reason of the Event a start on the snapshot posts.
pub const EVENT_REASON: &str = "ConfigurationRefused";

/// The configuration a start serves, its guests loaded.
pub(crate) struct StartConfig {
    /// The configuration.
    pub(crate) config: ConfigSet,
    /// The Wasm engine it asks for.
    pub(crate) engine: Arc<PolicyEngine>,
    /// Every resource, loaded, not scanned yet.
    pub(crate) resources: Vec<Arc<Resource>>,
    /// Why the node's configuration was refused, when the snapshot is
    /// served instead.
    pub(crate) refused: Option<String>,
}

/// What the host serves at start (see the module's documentation).
pub(crate) async fn choose(
    options: &HostOptions,
    registration: RegistrationPath,
    root: &HostRoot,
    metrics: &Arc<Metrics>,
) -> Result<StartConfig, HostError> {
    let state_dir = options.state_dir.clone();
    let snapshot_kept = options.serve_last_good && last_good::exists(&state_dir);
    let live = match config_sets::load_initial_set(options, !snapshot_kept).await {
        Ok(config) => prepare(options, registration, root, metrics, config).await,
        Err(error) => Err(error),
    };
    let error = match live {
        Ok(start) => return Ok(start),
        Err(error) if !snapshot_kept => return Err(error),
        Err(error) => error,
    };
    let config_dir = options.config_dir.clone();
    let snapshot = tokio::task::spawn_blocking(move || last_good::load(&state_dir, &config_dir))
        .await
        .map_err(HostError::Task)?;
    let shown_dir = last_good::snapshot_dir(&options.state_dir);
    let snapshot = match snapshot {
        Ok(Some(snapshot)) => snapshot,
        Ok(None) => return Err(error),
        Err(problem) => {
            tracing::error!(%problem, snapshot = %shown_dir.display(), "the last good configuration cannot be served either; refusing to start");
            return Err(error);
        }
    };
    let (set, digest) = (
        config_sets::shown(snapshot.set.as_deref()).to_owned(),
        snapshot.digest.clone(),
    );
    match prepare(options, registration, root, metrics, snapshot).await {
        Ok(mut start) => {
            tracing::error!(%error, snapshot = %shown_dir.display(), %set, %digest, "configuration refused at start; serving the last good configuration (its snapshot, guests verified with the keys trusted now) until the directory loads");
            start.refused = Some(error.to_string());
            Ok(start)
        }
        Err(problem) => {
            tracing::error!(%problem, snapshot = %shown_dir.display(), %set, "the last good configuration is refused too (by the keys trusted now, or the node's folders); refusing to start");
            Err(error)
        }
    }
}

/// `config` checked against the node's folders, its engine made and its
/// resources loaded (guests verified and smoke-tested); nothing served.
async fn prepare(
    options: &HostOptions,
    registration: RegistrationPath,
    root: &HostRoot,
    metrics: &Arc<Metrics>,
    config: ConfigSet,
) -> Result<StartConfig, HostError> {
    config.check_socket_paths(&options.device_plugin_dir)?;
    preflight::check_cdi_dir(&options.cdi_dir, &config)?;
    if registration == RegistrationPath::PluginWatcher {
        preflight::check_registration_socket_paths(&options.plugins_registry_dir, &config)?;
    }
    preflight::check_dra_setup(options, &config)?;
    let engine = new_engine(&config)?;
    let (loading, config_copy, root, metrics, cdi_dir) = (
        engine.clone(),
        config.clone(),
        root.clone(),
        metrics.resource.clone(),
        options.cdi_dir.clone(),
    );
    let resources = tokio::task::spawn_blocking(move || {
        Ok::<_, HostError>(
            load_specs(&loading, &config_copy)?
                .into_values()
                .map(|spec| {
                    Resource::unscanned(spec, root.clone(), metrics.clone(), Some(cdi_dir.clone()))
                })
                .collect(),
        )
    })
    .await
    .map_err(HostError::Task)??;
    Ok(StartConfig {
        config,
        engine,
        resources,
        refused: None,
    })
}

impl Host {
    /// After a start: the configuration served kept as the last good one,
    /// or, when the snapshot serves because `refused` was, that said in
    /// `config_valid`, `/readyz` and an Event on the node.
    pub(crate) async fn started(self: &Arc<Self>, refused: Option<String>) {
        let Some(error) = refused else {
            let (config, served) = {
                let state = self.state.lock().await;
                (state.config.clone(), served_guests(&state.running))
            };
            keep(&self.options, config, served).await;
            return;
        };
        self.metrics.host.config_valid.set(0);
        self.last_error.send_replace(Some(error.clone()));
        if self.options.node_name.is_empty() {
            return;
        }
        let (node, kubeconfig) = (
            self.options.node_name.clone(),
            self.options.kubeconfig.clone(),
        );
        let stop = self.shutdown.clone();
        tokio::spawn(async move {
            let message = format!(
                "configuration refused at start; serving the last good configuration: {error}"
            );
            let posted = async {
                let client = wdp_dra_client::client(kubeconfig.as_deref())
                    .await
                    .map_err(|error| error.to_string())?;
                crate::node_event::post_node_event(&client, &node, EVENT_REASON, &message)
                    .await
                    .map_err(|error| error.to_string())
            };
            tokio::select! {
                () = stop.cancelled() => {}
                result = posted => if let Err(error) = result {
                    tracing::warn!(%node, %error, "cannot post the Event saying the node serves its last good configuration");
                },
            }
        });
    }
}

/// The guests the `running` resources serve: each guest file with the
/// content hash of its build, as [`keep`] records them.
pub(crate) fn served_guests(running: &BTreeMap<String, Running>) -> BTreeMap<PathBuf, String> {
    let mut served: BTreeMap<PathBuf, String> = BTreeMap::new();
    for r in running.values() {
        let spec = r.resource.spec();
        for binding in &spec.config.hooks {
            if let Some((binding, guest)) = spec.bound(binding.hook) {
                served.insert(binding.guest.clone(), guest.content_hash().to_owned());
            }
        }
    }
    served
}

/// Keeps `config`, serving the guests `served` (see [`served_guests`]), as
/// the last good configuration (a failure is logged at WARN: the snapshot
/// before stays).
pub(crate) async fn keep(
    options: &HostOptions,
    config: ConfigSet,
    served: BTreeMap<PathBuf, String>,
) {
    let state_dir = options.state_dir.clone();
    let kept =
        tokio::task::spawn_blocking(move || last_good::save(&state_dir, &config, &served)).await;
    match kept {
        Ok(Ok(true)) => {
            tracing::debug!(snapshot = %last_good::snapshot_dir(&options.state_dir).display(), "last good configuration kept");
        }
        Ok(Ok(false)) => {}
        Ok(Err(error)) => {
            tracing::warn!(%error, "cannot keep the configuration served as the last good one; the snapshot before stays");
        }
        Err(error) => tracing::warn!(%error, "keeping the last good configuration failed"),
    }
}
