//! A configuration's guests put in service: the Wasm engine the
//! configuration asks for (its precompiled-guest folder), and every
//! resource's spec loaded and smoke-tested, keeping the spec of a resource
//! whose configuration and guest files did not change. Shared by `run`,
//! every reload, `check`, `test` and `precompile`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use wdp_policy::{EngineSettings, PolicyEngine};

use crate::error::ResourceError;
use crate::resource::Resource;
use crate::spec::ResourceSpec;
use wdp_config::ConfigSet;

/// The Wasm engine for a configuration (its precompiled-guest cache).
pub fn new_engine(config: &ConfigSet) -> Result<Arc<PolicyEngine>, ResourceError> {
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
        .map_err(ResourceError::Engine)
}

/// Loads and smoke-tests the guests of every resource. Blocking.
pub fn load_specs(
    engine: &PolicyEngine,
    config: &ConfigSet,
) -> Result<BTreeMap<String, ResourceSpec>, ResourceError> {
    load_changed_specs(engine, config, &BTreeMap::new())
}

/// [`load_specs`], except that a resource whose configuration and guest
/// files are those of its `running` spec ([`ResourceSpec::unchanged_for`])
/// keeps that spec: nothing untouched is loaded, smoke-tested or
/// rediscovered again, whatever else the directory holds. Blocking.
pub fn load_changed_specs(
    engine: &PolicyEngine,
    config: &ConfigSet,
    running: &BTreeMap<String, Arc<Resource>>,
) -> Result<BTreeMap<String, ResourceSpec>, ResourceError> {
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
        wdp_memory::release_free_memory();
        tracing::debug!(elapsed_ms = ms(started), "reload: free memory released");
    }
    specs
}

/// Milliseconds since `started`, for the load path's timing logs.
pub fn ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1e3
}
