//! What a live reload of the config directory changes, decided before
//! anything changes: the new content parsed, every changed guest compiled
//! and smoke-tested, every changed resource's discovery dry-run, and every
//! new resource built. Only a `ReloadPlan` that got this far is applied
//! (by the supervisor, all at once); unchanged resources are left alone.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use wdp_config::ConfigSet;
use wdp_hardware::HostRoot;
use wdp_policy::PolicyEngine;
use wdp_resource::ResourceSpec;
use wdp_resource::{DeviceSet, Resource};
use wdp_resource::{load_changed_specs, ms};

use crate::error::HostError;
use crate::metrics::Metrics;

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
    /// Resources now served through the other kubelet API (`api`
    /// changed), their devices handed over (docs/api-switch.md).
    pub switched: Vec<String>,
}

impl ReloadSummary {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.updated.is_empty()
            && self.switched.is_empty()
    }
}

/// A new configuration ready to apply: every spec loaded, changed
/// resources dry-run, new resources built (not yet served).
pub(crate) struct ReloadPlan {
    /// Every resource of the new configuration, by name.
    pub(crate) specs: BTreeMap<String, ResourceSpec>,
    /// The resources that were not running, or run under the other
    /// kubelet API, built.
    pub(crate) fresh: BTreeMap<String, Arc<Resource>>,
}

/// What a plan is made with.
pub(crate) struct PlanInputs {
    /// The engine guests are compiled by.
    pub(crate) engine: Arc<PolicyEngine>,
    /// The node's root, for hardware reads.
    pub(crate) root: HostRoot,
    /// The host's metrics, for new resources.
    pub(crate) metrics: Arc<Metrics>,
    /// The CDI folder, for new resources' specs.
    pub(crate) cdi_dir: PathBuf,
}

/// Plans the change from the `running` resources to `config`: loads what
/// changed, dry-runs every changed resource and builds every new one, so
/// that applying the plan cannot fail for a guest or hardware reason.
/// Blocking.
pub(crate) fn plan(
    inputs: &PlanInputs,
    config: &ConfigSet,
    running: &BTreeMap<String, Arc<Resource>>,
    started: Instant,
) -> Result<ReloadPlan, HostError> {
    let specs = load_changed_specs(&inputs.engine, config, running)?;
    tracing::debug!(elapsed_ms = ms(started), "reload: guests prepared");
    let mut fresh: BTreeMap<String, Arc<Resource>> = BTreeMap::new();
    for (name, spec) in &specs {
        match running.get(name) {
            Some(existing) if existing.spec().same_as(spec) || existing.spec().serves_as(spec) => {}
            Some(existing) if existing.spec().config.api == spec.config.api => {
                let set = existing.dry_run(spec)?;
                check_publishable(spec, &set)?;
            }
            // New, or moving to the other kubelet API: built afresh.
            _ => {
                let (resource, warnings) = Resource::new(
                    spec.clone(),
                    inputs.root.clone(),
                    inputs.metrics.resource.clone(),
                    Some(inputs.cdi_dir.clone()),
                )?;
                check_publishable(spec, &resource.devices())?;
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
    Ok(ReloadPlan { specs, fresh })
}

/// For a DRA resource, what `check` refuses of the device set `spec` would
/// publish ([`wdp_dra_driver::check_publishable`]): the same refusal at
/// start, at every reload and in `check`.
pub(crate) fn check_publishable(spec: &ResourceSpec, set: &DeviceSet) -> Result<(), HostError> {
    match &spec.config.driver {
        Some(driver) => Ok(wdp_dra_driver::check_publishable(spec, driver, set)?),
        None => Ok(()),
    }
}
