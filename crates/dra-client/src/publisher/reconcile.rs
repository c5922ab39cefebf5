//! One reconcile pass: make the API server's slices of a pool equal to the plan.
//!
//! The first pass learns the server's version (`GET /version`), and keeps
//! it until the server refuses a write as invalid (422: it may have been
//! upgraded meanwhile, so the next pass asks again); the plan follows it (see [`crate::plan`]). Each pass leaves out of the pool
//! what the server was found to drop (see [`super::drops`]), taints whose
//! effect the server does not know (`None` before 1.35) and what
//! [`validate_pool`] flags, then lists the driver's slices on the node. When the plan at the
//! generation found there equals them (ignoring server-set metadata and the
//! taints' `timeAdded`), it writes nothing. Otherwise it bumps the generation
//! above every one seen, rewrites every slice of the pool (replacing existing
//! ones with the resourceVersion read, creating the missing ones, keeping the
//! `timeAdded` of taints that stay) and deletes the surplus, including slices
//! of this driver and node that belong to another pool name.
//!
//! New slices are named by the API server from `generateName:
//! <node>-<driver>-` (cut to 57 characters, so the server's 5-character suffix
//! keeps it a valid name of at most 63); names never need to be predicted,
//! and two publishers for different nodes or drivers can never collide.

use std::collections::HashMap;

use k8s_openapi::api::resource::v1::{ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};

use super::drops::{Dropped, without_dropped};
use crate::error::ApiError;
use crate::plan::{PoolTarget, plan_pool};
use crate::pool::PoolContent;
use crate::problem::DeviceProblem;
use crate::validate::{validate_pool, without_unknown_effects};
use crate::version::ServerVersion;
use wdp_k8s_naming::Quantity;

/// What the publisher remembers between passes.
#[derive(Debug, Default)]
pub(crate) struct Memory {
    /// name → resourceVersion of every slice of ours as the last pass left it;
    /// a watch event that matches is the echo of our own write.
    pub known: HashMap<String, String>,
    /// The highest generation this publisher wrote.
    pub last_generation: i64,
    /// The API server dropped the taints we wrote (DRADeviceTaints off).
    pub taints_dropped: bool,
    /// Other fields the API server dropped (feature gates off).
    pub dropped: Dropped,
    /// The server's version, once learned.
    pub version: Option<ServerVersion>,
}

/// What one successful pass found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PassOutcome {
    /// The pool generation now on the server.
    pub generation: i64,
    /// How many slices the pool has.
    pub slices: usize,
    /// How many devices they hold.
    pub devices: usize,
    /// Write requests (create, replace, delete) this pass made.
    pub writes: u64,
    /// What was left out of the pool, and why.
    pub problems: Vec<DeviceProblem>,
}

/// The server's version: remembered, or asked once (`GET /version`). A
/// version that cannot be read, or a 404, counts as the newest layout known.
pub(crate) async fn server_version(
    api: &Api<ResourceSlice>,
    target: &PoolTarget,
    memory: &mut Memory,
) -> Result<ServerVersion, ApiError> {
    if let Some(version) = memory.version {
        return Ok(version);
    }
    let answer = api.clone().into_client().apiserver_version().await;
    let info = match answer {
        Ok(info) => Some(info),
        // A server (or a proxy in front of it) that serves no /version.
        Err(kube::Error::Api(status)) if status.is_not_found() => None,
        Err(source) => {
            return Err(ApiError::request(
                format!("reading the API server's version for {}", target.describe()),
                source,
            ));
        }
    };
    let version = info
        .as_ref()
        .and_then(ServerVersion::from_info)
        .unwrap_or_else(|| {
            let fallback = ServerVersion::default();
            let answered = info.as_ref().map(|info| info.git_version.clone());
            tracing::warn!(driver = %target.driver, node = %target.node_name, ?answered, assumed = %fallback, "the API server's version cannot be read; planning ResourceSlices for the newest layout known");
            fallback
        });
    tracing::debug!(driver = %target.driver, node = %target.node_name, %version, "learned the API server's version");
    memory.version = Some(version);
    Ok(version)
}

/// The field selector picking the slices of `target`'s driver on its node.
pub(crate) fn field_selector(target: &PoolTarget) -> String {
    format!(
        "spec.nodeName={},spec.driver={}",
        target.node_name, target.driver
    )
}

/// The `generateName` of new slices: `<node>-<driver>-`, cut to fit.
pub(crate) fn generate_name_prefix(target: &PoolTarget) -> String {
    const MAX_PREFIX_BEFORE_DASH: usize = 57;
    let mut base = format!("{}-{}", target.node_name, target.driver);
    base.truncate(MAX_PREFIX_BEFORE_DASH);
    let trimmed = base.trim_end_matches(['-', '.']);
    format!("{trimmed}-")
}

/// Lists the slices of `target`'s driver on its node.
pub(crate) async fn list_slices(
    api: &Api<ResourceSlice>,
    target: &PoolTarget,
) -> Result<Vec<ResourceSlice>, ApiError> {
    let params = ListParams::default().fields(&field_selector(target));
    let list = api.list(&params).await.map_err(|source| {
        ApiError::request(
            format!("listing ResourceSlices of {}", target.describe()),
            source,
        )
    })?;
    Ok(list.items)
}

/// Deletes the slice `name`; one already gone counts as deleted.
pub(crate) async fn delete_slice(
    api: &Api<ResourceSlice>,
    target: &PoolTarget,
    name: &str,
) -> Result<(), ApiError> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(source) => Err(ApiError::request(
            format!("deleting ResourceSlice {name} of {}", target.describe()),
            source,
        )),
    }
}

/// Runs one pass for `content` (see the module docs).
pub(crate) async fn reconcile(
    api: &Api<ResourceSlice>,
    target: &PoolTarget,
    content: &PoolContent,
    memory: &mut Memory,
) -> Result<PassOutcome, ApiError> {
    let version = server_version(api, target, memory).await?;
    let check = validate_pool(
        &target.driver,
        &without_unknown_effects(&without_dropped(content, memory.dropped), version),
        version,
    );
    let content = check.content;
    let devices = content.devices.len();
    let problems = check.problems;
    let existing = list_slices(api, target).await?;
    let server_generation = existing.iter().map(|s| s.spec.pool.generation).max();
    let (mut ours, foreign): (Vec<ResourceSlice>, Vec<ResourceSlice>) = existing
        .into_iter()
        .partition(|slice| slice.spec.pool.name == target.pool_name);
    ours.sort_by_key(|slice| slice.name_any());

    if foreign.is_empty()
        && let Some(generation) = already_published(target, &content, version, &ours, memory)
    {
        return Ok(PassOutcome {
            generation,
            slices: ours.len(),
            devices,
            writes: 0,
            problems,
        });
    }

    // A pass that wrote nothing leaves `last_generation`, so retries after a
    // rejection do not climb; one that wrote part of the pool moves it on.
    let generation = server_generation.unwrap_or(0).max(memory.last_generation) + 1;
    let mut planned = plan_pool(target, &content, version, generation);
    keep_taint_times(&mut planned, &ours);

    let mut writes = 0;
    let mut surplus = ours.into_iter();
    let planned_count = planned.len();
    for spec in planned {
        let sent = spec.clone();
        let written = write_slice(api, target, generation, surplus.next(), spec).await?;
        writes += 1;
        remember_written(memory, generation, &sent, &written);
    }
    for old in surplus.chain(foreign) {
        let name = old.name_any();
        memory.known.remove(&name);
        delete_slice(api, target, &name).await?;
        writes += 1;
    }
    Ok(PassOutcome {
        generation,
        slices: planned_count,
        devices,
        writes,
        problems,
    })
}

/// When the pool's slices `ours` (sorted by name) share one generation
/// and hold what `content` plans at it, remembers their resourceVersions
/// in `memory` and returns that generation; `None` when the pool must be
/// written.
fn already_published(
    target: &PoolTarget,
    content: &PoolContent,
    version: ServerVersion,
    ours: &[ResourceSlice],
    memory: &mut Memory,
) -> Option<i64> {
    let generation = single_generation(ours)?;
    let mut planned = plan_pool(target, content, version, generation);
    if memory.taints_dropped {
        planned.iter_mut().for_each(strip_taints);
    }
    if !same_content(&planned, ours.iter().map(|slice| &slice.spec)) {
        return None;
    }
    memory.known = ours
        .iter()
        .map(|slice| {
            (
                slice.name_any(),
                slice.resource_version().unwrap_or_default(),
            )
        })
        .collect();
    Some(generation)
}

/// Writes `spec` at pool generation `generation`: over the slice `old`
/// (keeping its metadata, so the write is refused if it changed since it
/// was read), or as a new slice named by the server. Returns the slice as
/// the server stored it.
async fn write_slice(
    api: &Api<ResourceSlice>,
    target: &PoolTarget,
    generation: i64,
    old: Option<ResourceSlice>,
    spec: ResourceSliceSpec,
) -> Result<ResourceSlice, ApiError> {
    match old {
        Some(old) => {
            let name = old.name_any();
            let replacement = ResourceSlice {
                metadata: old.metadata,
                spec,
            };
            api.replace(&name, &PostParams::default(), &replacement)
                .await
                .map_err(|source| {
                    ApiError::request(
                        format!(
                            "replacing ResourceSlice {name} of {} (pool generation {generation})",
                            target.describe()
                        ),
                        source,
                    )
                })
        }
        None => {
            let slice = ResourceSlice {
                metadata: ObjectMeta {
                    generate_name: Some(generate_name_prefix(target)),
                    ..ObjectMeta::default()
                },
                spec,
            };
            api.create(&PostParams::default(), &slice)
                .await
                .map_err(|source| {
                    ApiError::request(
                        format!(
                            "creating a ResourceSlice of {} (pool generation {generation})",
                            target.describe()
                        ),
                        source,
                    )
                })
        }
    }
}

/// Records in `memory` a slice written at `generation`: its
/// resourceVersion, and whatever of `sent` the server's answer `written`
/// dropped.
fn remember_written(
    memory: &mut Memory,
    generation: i64,
    sent: &ResourceSliceSpec,
    written: &ResourceSlice,
) {
    memory.last_generation = generation;
    memory.known.insert(
        written.name_any(),
        written.resource_version().unwrap_or_default(),
    );
    if has_taints(sent) {
        memory.taints_dropped = !has_taints(&written.spec);
    }
    memory.dropped = memory.dropped.dropped_by(sent, &written.spec);
}

/// The generation shared by all `slices`, or `None` when there are none or they differ.
fn single_generation(slices: &[ResourceSlice]) -> Option<i64> {
    let first = slices.first()?.spec.pool.generation;
    slices
        .iter()
        .all(|slice| slice.spec.pool.generation == first)
        .then_some(first)
}

fn has_taints(spec: &ResourceSliceSpec) -> bool {
    spec.devices.iter().flatten().any(|device| {
        device
            .taints
            .as_ref()
            .is_some_and(|taints| !taints.is_empty())
    })
}

fn strip_taints(spec: &mut ResourceSliceSpec) {
    for device in spec.devices.iter_mut().flatten() {
        device.taints = None;
    }
}

/// `spec` without what the server may add or we do not compare: the taints'
/// `timeAdded`, empty lists or maps that mean the same as absent ones, and
/// the spelling of quantities.
fn normalized(spec: &ResourceSliceSpec) -> ResourceSliceSpec {
    let mut spec = spec.clone();
    if spec.devices.as_ref().is_some_and(Vec::is_empty) {
        spec.devices = None;
    }
    if spec.shared_counters.as_ref().is_some_and(Vec::is_empty) {
        spec.shared_counters = None;
    }
    for set in spec.shared_counters.iter_mut().flatten() {
        for counter in set.counters.values_mut() {
            canonical(&mut counter.value);
        }
    }
    for device in spec.devices.iter_mut().flatten() {
        if device.attributes.as_ref().is_some_and(|a| a.is_empty()) {
            device.attributes = None;
        }
        if device.capacity.as_ref().is_some_and(|c| c.is_empty()) {
            device.capacity = None;
        }
        if device.consumes_counters.as_ref().is_some_and(Vec::is_empty) {
            device.consumes_counters = None;
        }
        if device.allow_multiple_allocations == Some(false) {
            device.allow_multiple_allocations = None;
        }
        for consumption in device.consumes_counters.iter_mut().flatten() {
            for counter in consumption.counters.values_mut() {
                canonical(&mut counter.value);
            }
        }
        for capacity in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
            canonical(&mut capacity.value);
            if let Some(policy) = &mut capacity.request_policy {
                policy.default.iter_mut().for_each(canonical);
                policy.valid_values.iter_mut().flatten().for_each(canonical);
                if policy.valid_values.as_ref().is_some_and(Vec::is_empty) {
                    policy.valid_values = None;
                }
                if let Some(range) = &mut policy.valid_range {
                    canonical(&mut range.min);
                    range.max.iter_mut().for_each(canonical);
                    range.step.iter_mut().for_each(canonical);
                }
            }
        }
        match &mut device.taints {
            Some(taints) if taints.is_empty() => device.taints = None,
            Some(taints) => taints.iter_mut().for_each(|taint| {
                taint.time_added = None;
                if taint.value.as_deref() == Some("") {
                    taint.value = None;
                }
            }),
            None => {}
        }
    }
    spec
}

/// The API server writes quantities in its own canonical form (`1024Mi`
/// comes back as `1Gi`): compare amounts, not spellings.
fn canonical(quantity: &mut ApiQuantity) {
    if let Ok(amount) = Quantity::parse(&quantity.0) {
        quantity.0 = amount.to_string();
    }
}

/// Whether the planned specs and those on the server hold the same content, in any order.
fn same_content<'a>(
    planned: &[ResourceSliceSpec],
    on_server: impl Iterator<Item = &'a ResourceSliceSpec>,
) -> bool {
    let canonical = |spec: &ResourceSliceSpec| {
        serde_json::to_string(&normalized(spec)).unwrap_or_else(|error| error.to_string())
    };
    let mut wanted: Vec<String> = planned.iter().map(canonical).collect();
    let mut found: Vec<String> = on_server.map(canonical).collect();
    wanted.sort();
    found.sort();
    wanted == found
}

/// Copies the `timeAdded` the server set on a taint that stays on its device.
fn keep_taint_times(planned: &mut [ResourceSliceSpec], existing: &[ResourceSlice]) {
    let mut times: HashMap<(&str, &str, Option<&str>, &str), &Time> = HashMap::new();
    for device in existing
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
    {
        for taint in device.taints.iter().flatten() {
            if let Some(time) = &taint.time_added {
                let key = (
                    device.name.as_str(),
                    taint.key.as_str(),
                    taint.value.as_deref(),
                    taint.effect.as_str(),
                );
                times.insert(key, time);
            }
        }
    }
    for device in planned
        .iter_mut()
        .flat_map(|s| s.devices.iter_mut().flatten())
    {
        for taint in device.taints.iter_mut().flatten() {
            let key = (
                device.name.as_str(),
                taint.key.as_str(),
                taint.value.as_deref(),
                taint.effect.as_str(),
            );
            taint.time_added = times.get(&key).map(|time| (*time).clone());
        }
    }
}

#[cfg(test)]
#[path = "reconcile_tests.rs"]
mod tests;
