//! One resource at run time: its config and loaded guests behind a single
//! swap point, its device set on a watch channel that every `ListAndWatch`
//! stream follows, and the decisions behind each kubelet RPC (built-in or
//! guest, always validated before the kubelet sees them).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use prost::Message;
use tokio::sync::{Notify, watch};
use tonic::Status;
use wdp_hardware::{Candidate, ChangeWatcher, HostRoot, Selector};
use wdp_kubelet_api::v1beta1::{
    CdiDevice, ContainerAllocateResponse, DevicePluginOptions, DeviceSpec, Mount,
};
use wdp_policy::{
    CallContext, CallError, CallErrorKind, CallLimits, Guest, Hook, HostServices, types as gt,
};

use crate::config::{HookBinding, OnError, ResourceConfig};
use crate::devices::{
    AdvertisedDevice, BaseDevice, DeviceSet, SharedDeviceSet, Verdict, builtin_allocate,
    builtin_discovery, builtin_preferred, builtin_verdict, validate_base_devices,
    validate_container_response, validate_preferred,
};
use crate::metrics::Metrics;

/// The kubelet's default gRPC receive limit.
pub const KUBELET_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// A resource's configuration with its guests loaded and smoke-tested.
#[derive(Clone)]
pub struct ResourceSpec {
    pub config: ResourceConfig,
    pub guests: BTreeMap<Hook, Arc<Guest>>,
}

impl std::fmt::Debug for ResourceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSpec")
            .field("resource", &self.config.resource)
            .field("hooks", &self.guests.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ResourceSpec {
    pub fn options(&self) -> DevicePluginOptions {
        DevicePluginOptions {
            pre_start_required: self.config.pre_start_required,
            get_preferred_allocation_available: self.config.get_preferred_allocation,
        }
    }

    fn bound(&self, hook: Hook) -> Option<(&HookBinding, &Arc<Guest>)> {
        Some((self.config.hook(hook)?, self.guests.get(&hook)?))
    }
}

/// Why a refresh could not produce a device set.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error("{file}: {source}")]
    Hardware {
        file: std::path::PathBuf,
        #[source]
        source: wdp_hardware::HardwareError,
    },
    #[error("{file}: {message}")]
    Guest {
        file: std::path::PathBuf,
        message: String,
    },
}

/// What discovery remembers between refreshes.
#[derive(Debug, Default)]
struct DiscoveryState {
    /// Every candidate seen since the resource started, last known facts.
    known: BTreeMap<String, Candidate>,
    /// The last base devices advertised.
    bases: Vec<BaseDevice>,
    /// The last health verdicts.
    verdicts: BTreeMap<String, Verdict>,
}

/// A result of the hardware scan plus guest discovery and health.
#[derive(Debug)]
pub struct Refreshed {
    pub set: DeviceSet,
    pub warnings: Vec<String>,
    /// Every candidate seen, present or gone (to watch for changes).
    pub candidates: Vec<Candidate>,
}

/// One configured resource, shared by its gRPC server, its refresh loop and
/// the reload logic.
pub struct Resource {
    name: String,
    root: HostRoot,
    spec: ArcSwap<ResourceSpec>,
    devices: watch::Sender<SharedDeviceSet>,
    discovery: Mutex<DiscoveryState>,
    metrics: Arc<Metrics>,
    /// Wakes the refresh loop (new spec, explicit request).
    refresh_wanted: Notify,
    /// inotify on the selected hardware, where the kernel gives events;
    /// `None` when it cannot be set up (polling still runs).
    hardware: Option<ChangeWatcher>,
}

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("name", &self.name)
            .finish()
    }
}

impl Resource {
    /// Creates the resource and runs its first discovery; fails (naming the
    /// config file) when the hardware it names is missing or its discovery
    /// guest fails, so nothing half-configured is ever served.
    pub fn new(
        spec: ResourceSpec,
        root: HostRoot,
        metrics: Arc<Metrics>,
    ) -> Result<(Arc<Self>, Vec<String>), DiscoveryError> {
        let resource = Arc::new(Self {
            name: spec.config.resource.clone(),
            root: root.clone(),
            spec: ArcSwap::from_pointee(spec),
            devices: watch::Sender::new(Arc::new(DeviceSet::default())),
            discovery: Mutex::new(DiscoveryState::default()),
            metrics,
            refresh_wanted: Notify::new(),
            hardware: ChangeWatcher::new(&root)
                .inspect_err(|error| tracing::warn!(%error, "no hardware events; polling only"))
                .ok(),
        });
        let refreshed = resource.compute(true)?;
        let warnings = refreshed.warnings.clone();
        resource.publish(refreshed);
        Ok((resource, warnings))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn root(&self) -> &HostRoot {
        &self.root
    }

    pub fn spec(&self) -> Arc<ResourceSpec> {
        self.spec.load_full()
    }

    pub fn devices(&self) -> SharedDeviceSet {
        self.devices.borrow().clone()
    }

    /// A receiver that sees every new device set.
    pub fn subscribe(&self) -> watch::Receiver<SharedDeviceSet> {
        self.devices.subscribe()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Computes the device set `spec` would produce, without publishing.
    /// Used to validate a reload before the swap.
    pub fn dry_run(&self, spec: &ResourceSpec) -> Result<Refreshed, DiscoveryError> {
        let state = self.discovery.lock().expect("discovery lock");
        let mut scratch = DiscoveryState {
            known: state.known.clone(),
            bases: state.bases.clone(),
            verdicts: state.verdicts.clone(),
        };
        drop(state);
        compute_with(
            &self.name,
            &self.root,
            spec,
            &mut scratch,
            true,
            &self.metrics,
        )
    }

    /// Swaps in a new spec (config and guests) atomically. In-flight calls
    /// finish with the spec they loaded; the next refresh uses the new one.
    pub fn replace_spec(&self, spec: ResourceSpec) {
        self.spec.store(Arc::new(spec));
        self.refresh_wanted.notify_one();
    }

    /// Asks the refresh loop to run now.
    pub fn request_refresh(&self) {
        self.refresh_wanted.notify_one();
    }

    /// Waits until a refresh is requested.
    pub async fn refresh_requested(&self) {
        self.refresh_wanted.notified().await;
    }

    /// A receiver that wakes when the watched hardware changes, if the
    /// kernel gives events for it.
    pub fn hardware_changes(&self) -> Option<wdp_hardware::ChangeReceiver> {
        self.hardware.as_ref().map(ChangeWatcher::subscribe)
    }

    /// Rescans hardware and reruns discovery and health; publishes a new
    /// device set when anything changed. Guest failures keep the last good
    /// state (logged); blocking, so call it from a blocking thread.
    pub fn refresh(&self) -> bool {
        match self.compute(false) {
            Ok(refreshed) => {
                for warning in &refreshed.warnings {
                    tracing::debug!(resource = %self.name, %warning, "hardware scan");
                }
                self.publish(refreshed)
            }
            Err(error) => {
                tracing::warn!(resource = %self.name, %error, "refresh failed; keeping the last device list");
                false
            }
        }
    }

    fn compute(&self, strict: bool) -> Result<Refreshed, DiscoveryError> {
        let spec = self.spec.load_full();
        let mut state = self.discovery.lock().expect("discovery lock");
        compute_with(
            &self.name,
            &self.root,
            &spec,
            &mut state,
            strict,
            &self.metrics,
        )
    }

    fn publish(&self, refreshed: Refreshed) -> bool {
        if let Some(watcher) = &self.hardware {
            let paths = wdp_hardware::watch_paths(
                &self.root,
                &self.spec.load().config.selectors,
                &refreshed.candidates,
            );
            for warning in watcher.set_paths(&paths) {
                tracing::debug!(resource = %self.name, %warning, "hardware watch");
            }
        }
        let set = refreshed.set;
        let healthy = set.healthy_count();
        let unhealthy = set.len() - healthy;
        let changed = self.devices.send_if_modified(|current| {
            if **current == set {
                false
            } else {
                *current = Arc::new(set);
                true
            }
        });
        self.metrics.set_devices(&self.name, healthy, unhealthy);
        if changed {
            tracing::info!(resource = %self.name, healthy, unhealthy, "device list changed");
        }
        changed
    }

    // ----- kubelet RPCs -------------------------------------------------

    /// `GetPreferredAllocation` for one container.
    pub async fn preferred(
        &self,
        available: &[String],
        must_include: &[String],
        size: i32,
    ) -> Result<Vec<String>, Status> {
        let set = self.devices();
        let spec = self.spec();
        let available_devices = set
            .resolve(available, true)
            .map_err(Status::invalid_argument)?;
        let must = set
            .resolve(must_include, true)
            .map_err(Status::invalid_argument)?;
        if let Some(d) = must.iter().find(|d| !available.contains(&d.id)) {
            return Err(Status::invalid_argument(format!(
                "must-include device {:?} is not among the available devices",
                d.id
            )));
        }
        let size = usize::try_from(size)
            .map_err(|_| Status::invalid_argument(format!("allocation_size {size} is negative")))?;
        if size > available.len() || size < must_include.len() {
            return Err(Status::invalid_argument(format!(
                "allocation_size {size} cannot be met from {} available devices with {} must-include",
                available.len(),
                must_include.len()
            )));
        }
        let builtin = || builtin_preferred(&available_devices, must_include, size);
        let Some((binding, guest)) = spec.bound(Hook::PreferredAllocation) else {
            return Ok(builtin());
        };
        let request = gt::PreferredRequest {
            available: available_devices.iter().map(|d| device_ref(d)).collect(),
            must_include: must_include.to_vec(),
            size: size as u32,
        };
        let outcome = self
            .call_guest(&spec, binding, guest, move |g, ctx| g.choose(ctx, &request))
            .await
            .and_then(|answer| {
                validate_preferred(&answer, available, must_include, size)
                    .map(|()| answer)
                    .map_err(|problem| self.invalid_answer(binding, guest, problem))
            });
        self.settle(binding, outcome, builtin)
    }

    /// `Allocate` for one container.
    pub async fn allocate(&self, ids: &[String]) -> Result<ContainerAllocateResponse, Status> {
        let set = self.devices();
        let spec = self.spec();
        let devices = set.resolve(ids, true).map_err(Status::invalid_argument)?;
        let default = builtin_allocate(&devices, &spec.config.permissions);
        let response = match spec.bound(Hook::Allocate) {
            None => default,
            Some((binding, guest)) => {
                let refs: Vec<gt::DeviceRef> = devices.iter().map(|d| device_ref(d)).collect();
                let guest_default = to_guest_response(&default);
                let outcome = self
                    .call_guest(&spec, binding, guest, move |g, ctx| {
                        g.allocate(ctx, &refs, &guest_default)
                    })
                    .await
                    .and_then(|answer| {
                        let response = from_guest_response(answer);
                        validate_container_response(&response)
                            .map(|()| response)
                            .map_err(|problem| self.invalid_answer(binding, guest, problem))
                    });
                self.settle(binding, outcome, || default)?
            }
        };
        let size = response.encoded_len();
        if size > KUBELET_MAX_MESSAGE_BYTES {
            return Err(Status::resource_exhausted(format!(
                "the Allocate answer would be {size} bytes, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte limit"
            )));
        }
        self.metrics
            .allocated_devices
            .get_or_create(&crate::metrics::ResourceLabel {
                resource: self.name.clone(),
            })
            .inc_by(ids.len() as u64);
        Ok(response)
    }

    /// `PreStartContainer`.
    pub async fn pre_start(&self, ids: &[String]) -> Result<(), Status> {
        let set = self.devices();
        let spec = self.spec();
        let devices = set.resolve(ids, true).map_err(Status::invalid_argument)?;
        let builtin_check = || -> Result<(), Status> {
            for d in &devices {
                for node in &d.nodes {
                    if !self.root.resolve(&node.path).exists() {
                        return Err(Status::failed_precondition(format!(
                            "device {:?}: node {} is gone",
                            d.id,
                            node.path.display()
                        )));
                    }
                }
            }
            Ok(())
        };
        let Some((binding, guest)) = spec.bound(Hook::PreStart) else {
            return builtin_check();
        };
        let refs: Vec<gt::DeviceRef> = devices.iter().map(|d| device_ref(d)).collect();
        let outcome = self
            .call_guest(&spec, binding, guest, move |g, ctx| g.pre_start(ctx, &refs))
            .await;
        match outcome {
            Ok(()) => Ok(()),
            // The guest refused on purpose: that is its answer, not a fault.
            Err(GuestFailure::Call(CallError::GuestError { message, .. })) => {
                Err(Status::failed_precondition(format!(
                    "pre-start guest {} refused: {message}",
                    guest.name()
                )))
            }
            Err(failure) => match binding.on_error {
                OnError::Fail => Err(failure.into_status()),
                OnError::Builtin => builtin_check(),
            },
        }
    }

    // ----- guest plumbing ----------------------------------------------

    /// Runs a guest hook on a blocking thread under the binding's limits,
    /// recording metrics. A host-side backstop timeout guards against a
    /// host import that blocks (the epoch deadline covers guest code).
    async fn call_guest<T: Send + 'static>(
        &self,
        spec: &Arc<ResourceSpec>,
        binding: &HookBinding,
        guest: &Arc<Guest>,
        call: impl FnOnce(&Guest, &CallContext) -> Result<T, CallError> + Send + 'static,
    ) -> Result<T, GuestFailure> {
        let ctx = call_context(spec, binding, &self.root, self.known_candidates());
        let guest_for_call = guest.clone();
        let started = Instant::now();
        let task = tokio::task::spawn_blocking(move || call(&guest_for_call, &ctx));
        let backstop = binding.timeout + Duration::from_secs(2);
        let result = match tokio::time::timeout(backstop, task).await {
            Ok(Ok(result)) => result.map_err(GuestFailure::Call),
            Ok(Err(join)) => Err(GuestFailure::Host(format!(
                "guest {} hook {} panicked in the host: {join}",
                guest.name(),
                binding.hook
            ))),
            Err(_) => Err(GuestFailure::Host(format!(
                "guest {} hook {} did not return within {backstop:?}",
                guest.name(),
                binding.hook
            ))),
        };
        let label = match &result {
            Ok(_) => "ok",
            Err(GuestFailure::Call(e)) => call_error_label(e),
            Err(GuestFailure::Host(_)) => "timeout",
            Err(GuestFailure::Invalid(_)) => "invalid-answer",
        };
        self.metrics.observe_guest(
            &self.name,
            guest.name(),
            &binding.hook.to_string(),
            label,
            started.elapsed(),
        );
        result
    }

    fn invalid_answer(
        &self,
        binding: &HookBinding,
        guest: &Guest,
        problem: String,
    ) -> GuestFailure {
        self.metrics.observe_guest(
            &self.name,
            guest.name(),
            &binding.hook.to_string(),
            "invalid-answer",
            Duration::ZERO,
        );
        GuestFailure::Invalid(format!(
            "guest {} hook {} gave an invalid answer: {problem}",
            guest.name(),
            binding.hook
        ))
    }

    /// Applies the binding's failure policy to a guest outcome.
    fn settle<T>(
        &self,
        binding: &HookBinding,
        outcome: Result<T, GuestFailure>,
        builtin: impl FnOnce() -> T,
    ) -> Result<T, Status> {
        match outcome {
            Ok(value) => Ok(value),
            Err(failure) => {
                tracing::warn!(resource = %self.name, hook = %binding.hook, error = %failure, on_error = %binding.on_error, "guest call failed");
                match binding.on_error {
                    OnError::Fail => Err(failure.into_status()),
                    OnError::Builtin => Ok(builtin()),
                }
            }
        }
    }

    fn known_candidates(&self) -> Vec<Candidate> {
        let state = self.discovery.lock().expect("discovery lock");
        let present: BTreeSet<&String> = state
            .bases
            .iter()
            .flat_map(|b| b.candidates.iter())
            .collect();
        state
            .known
            .values()
            .filter(|c| present.contains(&c.id))
            .cloned()
            .collect()
    }
}

/// A failed guest call as the host sees it.
#[derive(Debug, thiserror::Error)]
pub enum GuestFailure {
    #[error("{0}")]
    Call(CallError),
    #[error("{0}")]
    Host(String),
    #[error("{0}")]
    Invalid(String),
}

impl GuestFailure {
    fn into_status(self) -> Status {
        match &self {
            GuestFailure::Call(CallError::Timeout { .. }) | GuestFailure::Host(_) => {
                Status::deadline_exceeded(self.to_string())
            }
            _ => Status::internal(self.to_string()),
        }
    }
}

fn call_error_label(error: &CallError) -> &'static str {
    match error.kind() {
        CallErrorKind::Timeout => "timeout",
        CallErrorKind::OutOfMemory => "out-of-memory",
        CallErrorKind::GuestError => "guest-error",
        CallErrorKind::Instantiate => "instantiate",
        CallErrorKind::NotExported => "not-exported",
        _ => "trap",
    }
}

/// The facts a guest may see during a call: the resource's candidates,
/// attribute access scoped beneath them, and the granted writes.
struct ResourceServices {
    root: HostRoot,
    candidates: Vec<Candidate>,
    writable: Vec<String>,
}

impl ResourceServices {
    fn find(&self, id: &str) -> Result<&Candidate, String> {
        self.candidates
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("candidate {id:?} is not selected by this resource"))
    }
}

impl HostServices for ResourceServices {
    fn candidates(&self) -> Vec<gt::Candidate> {
        self.candidates
            .iter()
            .map(|c| guest_candidate(c, is_present(&self.root, c)))
            .collect()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        let candidate = self.find(candidate_id)?;
        wdp_hardware::read_attribute(&self.root, candidate, name).map_err(|e| e.to_string())
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String> {
        let candidate = self.find(candidate_id)?;
        wdp_hardware::write_attribute(&self.root, candidate, name, value, &self.writable)
            .map_err(|e| e.to_string())
    }
}

/// Presence of a candidate right now, for `hardware.candidates()`.
fn is_present(root: &HostRoot, candidate: &Candidate) -> bool {
    match &candidate.sysfs_dir {
        Some(dir) => root.resolve(dir).exists(),
        None => candidate
            .nodes
            .iter()
            .all(|n| root.resolve(&n.path).exists()),
    }
}

fn call_context(
    spec: &ResourceSpec,
    binding: &HookBinding,
    root: &HostRoot,
    candidates: Vec<Candidate>,
) -> CallContext {
    CallContext {
        limits: CallLimits {
            timeout: binding.timeout,
            memory_bytes: binding.memory_limit_bytes,
        },
        services: Arc::new(ResourceServices {
            root: root.clone(),
            candidates,
            writable: spec.config.writable_attributes.clone(),
        }),
        config: Arc::new(spec.config.guest_config.clone()),
        resource: spec.config.resource.clone(),
    }
}

/// The discovery + health pipeline, shared by refreshes and dry runs.
fn compute_with(
    name: &str,
    root: &HostRoot,
    spec: &ResourceSpec,
    state: &mut DiscoveryState,
    strict: bool,
    metrics: &Metrics,
) -> Result<Refreshed, DiscoveryError> {
    let file = spec.config.file.clone();
    let mut warnings = Vec::new();
    let mut tagged: Vec<(Candidate, u32)> = Vec::new();
    for (i, selector) in spec.config.selectors.iter().enumerate() {
        match wdp_hardware::discover(root, std::slice::from_ref(selector)) {
            Ok(scan) => {
                warnings.extend(scan.warnings);
                let replicas = spec.config.replicas.get(&i).copied().unwrap_or(1);
                for c in scan.candidates {
                    if !tagged.iter().any(|(t, _)| t.id == c.id) {
                        tagged.push((c, replicas));
                    }
                }
            }
            Err(source) if strict => return Err(DiscoveryError::Hardware { file, source }),
            Err(error) => warnings.push(format!("{}: {error}", describe(selector))),
        }
    }
    let present: BTreeSet<String> = tagged.iter().map(|(c, _)| c.id.clone()).collect();
    for (c, _) in &tagged {
        state.known.insert(c.id.clone(), c.clone());
    }

    // Discovery: the guest's answer, or one device per candidate.
    let mut bases = match spec.bound(Hook::Discovery) {
        None => builtin_discovery(&tagged),
        Some((binding, guest)) => {
            let input: Vec<gt::Candidate> = tagged
                .iter()
                .map(|(c, _)| guest_candidate(c, true))
                .collect();
            let ctx = call_context(
                spec,
                binding,
                root,
                tagged.iter().map(|(c, _)| c.clone()).collect(),
            );
            let started = Instant::now();
            let (label, answer) = match guest.discover(&ctx, &input) {
                Err(error) => (call_error_label(&error), Err(error.to_string())),
                Ok(devices) => {
                    let bases: Vec<BaseDevice> = devices.into_iter().map(base_from_guest).collect();
                    match validate_base_devices(&bases, &state.known) {
                        Ok(()) => ("ok", Ok(bases)),
                        Err(problem) => {
                            ("invalid-answer", Err(format!("invalid answer: {problem}")))
                        }
                    }
                }
            };
            metrics.observe_guest(name, guest.name(), "discovery", label, started.elapsed());
            match answer {
                Ok(bases) => bases,
                Err(message) if strict => {
                    return Err(DiscoveryError::Guest {
                        file,
                        message: format!("discovery guest {}: {message}", guest.name()),
                    });
                }
                Err(message) => {
                    warnings.push(format!("discovery guest {}: {message}", guest.name()));
                    match binding.on_error {
                        OnError::Builtin => builtin_discovery(&tagged),
                        OnError::Fail => state.bases.clone(),
                    }
                }
            }
        }
    };
    if let Err(problem) = validate_base_devices(&bases, &state.known) {
        return Err(DiscoveryError::Guest {
            file,
            message: problem,
        });
    }
    // A device whose hardware vanished stays listed (as Unhealthy) so the
    // kubelet and its pods learn about it, instead of silently dropping out.
    for old in &state.bases {
        let gone = old.candidates.iter().any(|c| !present.contains(c));
        if gone && !bases.iter().any(|b| b.id == old.id) {
            bases.push(old.clone());
        }
    }

    // Health: built-in presence rule, refined by the guest's verdicts.
    let mut verdicts: BTreeMap<String, Verdict> = bases
        .iter()
        .map(|b| (b.id.clone(), builtin_verdict(b, &present)))
        .collect();
    if let Some((binding, guest)) = spec.bound(Hook::Health) {
        let facts: Vec<gt::DeviceFacts> = bases
            .iter()
            .map(|b| gt::DeviceFacts {
                device: guest_device(b),
                candidates: b
                    .candidates
                    .iter()
                    .filter_map(|id| state.known.get(id))
                    .map(|c| guest_candidate(c, present.contains(&c.id)))
                    .collect(),
            })
            .collect();
        let ctx = call_context(
            spec,
            binding,
            root,
            tagged.iter().map(|(c, _)| c.clone()).collect(),
        );
        let started = Instant::now();
        let (label, answer) = match guest.check_health(&ctx, &facts) {
            Err(error) => (call_error_label(&error), Err(error.to_string())),
            Ok(list) => match validate_verdicts(&list, &verdicts) {
                Ok(()) => ("ok", Ok(list)),
                Err(problem) => ("invalid-answer", Err(format!("invalid answer: {problem}"))),
            },
        };
        metrics.observe_guest(name, guest.name(), "health", label, started.elapsed());
        match answer {
            Ok(list) => {
                for v in list {
                    verdicts.insert(
                        v.id,
                        Verdict {
                            healthy: v.healthy,
                            reason: v.reason,
                        },
                    );
                }
            }
            Err(message) => {
                warnings.push(format!("health guest {}: {message}", guest.name()));
                if binding.on_error == OnError::Fail {
                    // Keep the last verdicts of devices that still exist.
                    for (id, v) in &state.verdicts {
                        if let Some(slot) = verdicts.get_mut(id) {
                            *slot = v.clone();
                        }
                    }
                }
            }
        }
    }

    let set = DeviceSet::build(&bases, &verdicts, &state.known);
    let size = set.to_list().encoded_len();
    if size > KUBELET_MAX_MESSAGE_BYTES {
        return Err(DiscoveryError::Guest {
            file,
            message: format!(
                "{} devices make a {size}-byte ListAndWatch message, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte limit",
                set.len()
            ),
        });
    }
    state.bases = bases;
    state.verdicts = verdicts;
    Ok(Refreshed {
        set,
        warnings,
        // Gone hardware stays watched so its return is an event too.
        candidates: state.known.values().cloned().collect(),
    })
}

/// Verdicts must name devices of the input, each at most once.
fn validate_verdicts(
    list: &[gt::Verdict],
    known: &BTreeMap<String, Verdict>,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for v in list {
        if !known.contains_key(&v.id) {
            return Err(format!("verdict for unknown device {:?}", v.id));
        }
        if !seen.insert(v.id.as_str()) {
            return Err(format!("two verdicts for device {:?}", v.id));
        }
    }
    Ok(())
}

fn describe(selector: &Selector) -> String {
    match selector {
        Selector::Nodes(n) => format!("nodes {}", n.path),
        Selector::Pci(_) => "pci selector".to_owned(),
        Selector::Usb(_) => "usb selector".to_owned(),
    }
}

// ----- conversions between host and guest types ---------------------------

fn guest_node(n: &wdp_hardware::DeviceNode) -> gt::DeviceNode {
    gt::DeviceNode {
        path: n.path.to_string_lossy().into_owned(),
        node_type: match n.node_type {
            wdp_hardware::NodeType::Char => gt::NodeType::Char,
            wdp_hardware::NodeType::Block => gt::NodeType::Block,
            wdp_hardware::NodeType::Other => gt::NodeType::Other,
        },
        major: n.major,
        minor: n.minor,
    }
}

fn guest_candidate(c: &Candidate, present: bool) -> gt::Candidate {
    gt::Candidate {
        id: c.id.clone(),
        kind: match c.kind {
            wdp_hardware::CandidateKind::Pci => gt::CandidateKind::Pci,
            wdp_hardware::CandidateKind::Usb => gt::CandidateKind::Usb,
            wdp_hardware::CandidateKind::Node => gt::CandidateKind::Node,
        },
        present,
        numa_nodes: c.numa_nodes.clone(),
        attributes: c
            .attributes
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        nodes: c.nodes.iter().map(guest_node).collect(),
    }
}

fn guest_device(b: &BaseDevice) -> gt::Device {
    gt::Device {
        id: b.id.clone(),
        candidates: b.candidates.clone(),
        numa_nodes: b.numa_nodes.clone(),
        attributes: b.attributes.clone(),
        replicas: b.replicas,
    }
}

fn base_from_guest(d: gt::Device) -> BaseDevice {
    BaseDevice {
        id: d.id,
        candidates: d.candidates,
        numa_nodes: d.numa_nodes,
        attributes: d.attributes,
        replicas: d.replicas.max(1),
    }
}

fn device_ref(d: &AdvertisedDevice) -> gt::DeviceRef {
    gt::DeviceRef {
        id: d.id.clone(),
        device_id: d.device_id.clone(),
        numa_nodes: d.numa_nodes.clone(),
        attributes: d.attributes.clone(),
        nodes: d.nodes.iter().map(guest_node).collect(),
    }
}

fn to_guest_response(r: &ContainerAllocateResponse) -> gt::ContainerResponse {
    let mut envs: Vec<(String, String)> =
        r.envs.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    envs.sort();
    let mut annotations: Vec<(String, String)> = r
        .annotations
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.sort();
    gt::ContainerResponse {
        envs,
        mounts: r
            .mounts
            .iter()
            .map(|m| gt::Mount {
                container_path: m.container_path.clone(),
                host_path: m.host_path.clone(),
                read_only: m.read_only,
            })
            .collect(),
        devices: r
            .devices
            .iter()
            .map(|d| gt::DeviceSpec {
                container_path: d.container_path.clone(),
                host_path: d.host_path.clone(),
                permissions: d.permissions.clone(),
            })
            .collect(),
        annotations,
        cdi_devices: r.cdi_devices.iter().map(|c| c.name.clone()).collect(),
    }
}

fn from_guest_response(r: gt::ContainerResponse) -> ContainerAllocateResponse {
    ContainerAllocateResponse {
        envs: r.envs.into_iter().collect(),
        mounts: r
            .mounts
            .into_iter()
            .map(|m| Mount {
                container_path: m.container_path,
                host_path: m.host_path,
                read_only: m.read_only,
            })
            .collect(),
        devices: r
            .devices
            .into_iter()
            .map(|d| DeviceSpec {
                container_path: d.container_path,
                host_path: d.host_path,
                permissions: d.permissions,
            })
            .collect(),
        annotations: r.annotations.into_iter().collect(),
        cdi_devices: r
            .cdi_devices
            .into_iter()
            .map(|name| CdiDevice { name })
            .collect(),
    }
}
