//! A config directory loaded without serving it: what `check` prints and
//! what `test` exercises. The same loading, guest checks and first
//! discovery as `run` and every reload.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wdp_hardware::HostRoot;
use wdp_policy::Hook;

use wdp_config::{self as config, CdiMode};
use wdp_dra_driver::{DraReport, dra_report};
use wdp_resource::{DeviceSet, Resource, ResourceError, ResourceMetrics};
use wdp_resource::{load_specs, new_engine};

use crate::error::HostError;

/// What `check` prints for one resource.
#[derive(Clone, Debug)]
pub struct ResourceReport {
    /// The configuration set it belongs to (`None`: the default set).
    pub set: Option<String>,
    /// The extended resource name.
    pub resource: String,
    /// The file it comes from.
    pub file: PathBuf,
    /// The socket file name it would serve.
    pub socket: String,
    /// Whether `PreStartContainer` is registered.
    pub pre_start_required: bool,
    /// Whether `GetPreferredAllocation` is registered.
    pub get_preferred_allocation: bool,
    /// How `Allocate` names devices (`cdi`).
    pub cdi: CdiMode,
    /// Each bound hook with its guest.
    pub hooks: Vec<HookReport>,
    /// What it would advertise now (companions included).
    pub devices: DeviceSet,
    /// Problems of the hardware scan.
    pub warnings: Vec<String>,
    /// For a DRA resource: its driver, each device's DRA name and what
    /// the API server would refuse or drop.
    pub dra: Option<DraReport>,
}

/// A hook of a resource and the guest bound to it, as `check` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookReport {
    /// The hook.
    pub hook: Hook,
    /// The guest's name (its file name).
    pub guest: String,
    /// The SHA-256 of the guest file loaded (lower-case hex): what a
    /// `sha256` pin of the hook must say.
    pub sha256: String,
    /// Whether the configuration pins it.
    pub pinned: bool,
    /// The trusted key that verified its signature (file and
    /// fingerprint), where the resource requires signatures.
    pub signed_by: Option<String>,
}

/// What [`precompile`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrecompileReport {
    /// The precompiled-guest directory (`None`: `host.toml` names none,
    /// and nothing was compiled).
    pub dir: Option<PathBuf>,
    /// Each guest file the configuration names, once, with the file its
    /// compiled build is kept in.
    pub guests: Vec<(PathBuf, PathBuf)>,
}

/// Compiles every guest a config directory names into the directory its
/// `host.toml` gives as `precompiled-cache-dir` (builds already there are
/// mapped, not compiled again), checking and smoke-testing each as a load
/// does; discovery does not run. A host that finds its guests there never
/// runs the compiler: `run` calls this in a child process before serving,
/// so the compiler's memory is never the serving process's. Blocking.
pub fn precompile(config_dir: &Path) -> Result<PrecompileReport, HostError> {
    let config = config::load_dir(config_dir)?;
    let Some(dir) = config.host.precompiled_cache_dir.as_ref() else {
        return Ok(PrecompileReport::default());
    };
    let engine = new_engine(&config)?;
    load_specs(&engine, &config)?;
    let mut guests: Vec<(PathBuf, PathBuf)> = Vec::new();
    for resource in config.resources.values() {
        for binding in &resource.hooks {
            if guests.iter().any(|(g, _)| *g == binding.guest) {
                continue;
            }
            let bytes = std::fs::read(&binding.guest).map_err(|source| ResourceError::Guest {
                file: resource.file.clone(),
                hook: binding.hook,
                guest: binding.guest.clone(),
                source: Box::new(
                    wdp_policy::LoadError::Read {
                        path: binding.guest.clone(),
                        source,
                    }
                    .into(),
                ),
            })?;
            if let Some(path) = engine.precompiled_path(&bytes) {
                guests.push((binding.guest.clone(), path));
            }
        }
    }
    Ok(PrecompileReport {
        dir: Some(config.dir.join(dir)),
        guests,
    })
}

/// A resource loaded offline, with the warnings of its first hardware scan.
pub type LoadedResource = (Arc<Resource>, Vec<String>);

/// Validates a config directory offline, its default set and every named
/// configuration set, and reports what each resource would advertise.
/// Blocking: call it from a blocking thread.
pub fn check(config_dir: &Path, host_root: &Path) -> Result<Vec<ResourceReport>, HostError> {
    let mut reports = check_set(config_dir, host_root, None)?;
    for set in config::sets::named_sets(config_dir)? {
        reports.extend(check_set(config_dir, host_root, Some(&set))?);
    }
    Ok(reports)
}

/// As [`check`], for one configuration set (`None`: the default).
pub fn check_set(
    config_dir: &Path,
    host_root: &Path,
    set: Option<&str>,
) -> Result<Vec<ResourceReport>, HostError> {
    load_offline_set(config_dir, host_root, set)?
        .into_iter()
        .map(|(resource, warnings)| {
            let spec = resource.spec();
            let dra = match &spec.config.driver {
                Some(driver) => Some(dra_report(&resource, driver)?),
                None => None,
            };
            Ok(ResourceReport {
                set: set.map(str::to_owned),
                resource: resource.name().to_owned(),
                file: spec.config.file.clone(),
                socket: spec.config.socket.clone(),
                pre_start_required: spec.config.pre_start_required,
                get_preferred_allocation: resource.offers_preferred_allocation(),
                cdi: spec.config.cdi,
                hooks: spec
                    .guests
                    .iter()
                    .map(|(hook, guest)| HookReport {
                        hook: *hook,
                        guest: guest.name().to_owned(),
                        sha256: guest.content_hash().to_owned(),
                        pinned: spec
                            .config
                            .hook(*hook)
                            .is_some_and(|binding| binding.sha256.is_some()),
                        signed_by: spec.signers.get(hook).map(|(key, _)| key.to_string()),
                    })
                    .collect(),
                devices: (*resource.devices()).clone(),
                warnings,
                dra,
            })
        })
        .collect()
}

/// Loads a config directory into resources that are not served: every
/// guest loaded and smoke-tested, discovery and health run once. For
/// `check` and for exercising hooks offline (`test`). Blocking.
pub fn load_offline(config_dir: &Path, host_root: &Path) -> Result<Vec<LoadedResource>, HostError> {
    load_offline_set(config_dir, host_root, None)
}

/// As [`load_offline`], for configuration set `set` (`None`: the default).
pub fn load_offline_set(
    config_dir: &Path,
    host_root: &Path,
    set: Option<&str>,
) -> Result<Vec<LoadedResource>, HostError> {
    let config = config::load_set(config_dir, set)?;
    let engine = new_engine(&config)?;
    let specs = load_specs(&engine, &config)?;
    let root = HostRoot::new(host_root);
    let metrics = ResourceMetrics::unregistered();
    let resources = specs
        .into_values()
        .map(|spec| Resource::new(spec, root.clone(), metrics.clone(), None))
        .collect::<Result<_, _>>()?;
    Ok(resources)
}

/// Whether `config_dir`'s `host.toml` names a precompiled-guest folder
/// (false when it cannot be read: the start that follows reports it).
pub fn wants_precompiled_guests(config_dir: &Path) -> bool {
    wdp_config::load_host_settings(config_dir)
        .map(|host| host.precompiled_cache_dir.is_some())
        .unwrap_or(false)
}

/// The node label that picks `config_dir`'s configuration set.
pub fn config_set_label(config_dir: &Path) -> Result<String, HostError> {
    Ok(wdp_config::load_dir(config_dir)?
        .host
        .config_sets
        .node_label)
}

/// Whether CDI specs can be written into `dir` (created if missing), as a
/// host serving `reports` would need when any of them has `cdi` on.
pub fn check_cdi_dir_for(dir: &Path, reports: &[crate::ResourceReport]) -> std::io::Result<()> {
    if reports.iter().all(|r| r.cdi == wdp_config::CdiMode::Off) {
        return Ok(());
    }
    wdp_cdi::check_dir(dir)
}

/// The guests `config_dir` refers to that do not exist (none when it
/// cannot be read: the start that follows reports it).
pub fn missing_guests(config_dir: &Path) -> Vec<PathBuf> {
    let Ok(config) = wdp_config::load_dir(config_dir) else {
        return Vec::new();
    };
    config
        .resources
        .values()
        .flat_map(|resource| &resource.hooks)
        .filter(|binding| !binding.guest.exists())
        .map(|binding| binding.guest.clone())
        .collect()
}
