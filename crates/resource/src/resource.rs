//! One resource at run time and its swap point: the loaded spec, the
//! device set every `ListAndWatch` stream follows, and the candidates
//! guests may read during RPCs, each replaced whole and read without
//! locks. Only the refresh pipeline takes a lock (its own memory between
//! runs); kubelet RPCs never wait for it, nor for a busy guest.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use wdp_hardware::{Candidate, ChangeReceiver, ChangeWatcher, HostRoot};
use wdp_policy::Hook;

use crate::cdi_spec;
use crate::device_set::{DeviceSet, SharedDeviceSet};
use crate::error::ResourceError;
use crate::guest_call::GuestCaller;
use crate::health_log::{HealthLine, HealthLog};
use crate::held::{HeldDevice, HeldLayout};
use crate::metrics::ResourceMetrics;
use crate::pipeline::{self, DiscoveryState, Mode, Refreshed};
use crate::spec::ResourceSpec;
use crate::withholding::Withholding;
use wdp_config::{CdiMode, ServingApi};

/// One configured resource, shared by its gRPC server, its refresh loop
/// and the reload logic.
pub struct Resource {
    name: String,
    root: HostRoot,
    spec: ArcSwap<ResourceSpec>,
    devices: watch::Sender<SharedDeviceSet>,
    /// Whether the first scan has published its device set
    /// ([`Resource::first_scan`]); until then `devices` is empty and
    /// means nothing.
    scanned: watch::Sender<bool>,
    /// Candidates present at the latest refresh: what guests may read.
    present: ArcSwap<Vec<Candidate>>,
    /// The pipeline's memory; taken only by refreshes and dry runs.
    discovery: Mutex<DiscoveryState>,
    /// The latest scan and fallback warnings, to log only changes.
    warnings: Mutex<BTreeSet<String>>,
    pub(crate) caller: GuestCaller,
    metrics: Arc<ResourceMetrics>,
    /// Wakes the refresh loop (new spec, explicit request).
    refresh_wanted: Notify,
    /// inotify on the selected hardware, where the kernel gives events;
    /// `None` when it cannot be set up (polling still runs).
    hardware: Option<ChangeWatcher>,
    /// The hardware's changes since before the first scan, for the refresh
    /// loop to take: a change between the first scan and the loop's start
    /// (a busy runtime can leave a spawned loop unpolled for a while) wakes
    /// it instead of waiting for the next poll.
    changes: Mutex<Option<ChangeReceiver>>,
    /// How long the latest discovery and health run took, time spent in
    /// guests excepted (nanoseconds):
    /// what the next poll waits for in proportion ([`POLL_COST_FACTOR`]).
    refresh_cost_nanos: AtomicU64,
    /// Where CDI specs go (`None` offline: nothing is written).
    cdi_dir: Option<PathBuf>,
    /// The CDI spec last written, to write only changes.
    cdi_written: Mutex<Option<wdp_cdi::Spec>>,
    /// Which devices' health lines were logged lately (rate-limited).
    health_log: Mutex<HealthLog>,
    /// What the DRA driver's prepared claims hold of the layout.
    held: ArcSwap<HeldLayout>,
    /// The devices not offered for now ([`crate::withholding`]), given to
    /// every set published.
    withholding: ArcSwap<Withholding>,
    /// The device IDs of the latest `Allocate` answers, with when
    /// (at most [`RECENT_GRANTS`] of them): what the kubelet may not
    /// list yet as held.
    recent_grants: Mutex<VecDeque<(Instant, Vec<String>)>>,
}

/// How many `Allocate` answers [`Resource::granted_within`] remembers.
const RECENT_GRANTS: usize = 1024;

impl std::fmt::Debug for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// Creates the resource and runs its first discovery and health; fails
    /// (naming the config file, guest and hook) when the hardware it names
    /// cannot be read or a guest fails, so nothing half-configured is ever
    /// listed. Blocking. Also returns the warnings of the first scan.
    pub fn new(
        spec: ResourceSpec,
        root: HostRoot,
        metrics: Arc<ResourceMetrics>,
        cdi_dir: Option<PathBuf>,
    ) -> Result<(Arc<Self>, Vec<String>), ResourceError> {
        let resource = Self::unscanned(spec, root, metrics, cdi_dir);
        let warnings = resource.first_scan()?;
        Ok((resource, warnings))
    }

    /// Creates the resource without scanning anything: its device set is
    /// empty and [`Resource::is_scanned`] false until
    /// [`Resource::first_scan`] succeeds. For a host that registers while
    /// the first scan runs; a stream or a registration that needs the
    /// devices waits for [`Resource::wait_first_scan`].
    pub fn unscanned(
        spec: ResourceSpec,
        root: HostRoot,
        metrics: Arc<ResourceMetrics>,
        cdi_dir: Option<PathBuf>,
    ) -> Arc<Self> {
        let name = spec.config.resource.clone();
        let hardware = ChangeWatcher::new(&root);
        let changes = Mutex::new(Some(hardware.subscribe()));
        Arc::new(Self {
            caller: GuestCaller::new(&name, root.clone(), metrics.clone()),
            name,
            root,
            spec: ArcSwap::from_pointee(spec),
            devices: watch::Sender::new(Arc::new(DeviceSet::default())),
            scanned: watch::Sender::new(false),
            present: ArcSwap::from_pointee(Vec::new()),
            discovery: Mutex::new(DiscoveryState::default()),
            warnings: Mutex::new(BTreeSet::new()),
            metrics,
            refresh_wanted: Notify::new(),
            hardware: Some(hardware),
            changes,
            cdi_dir,
            cdi_written: Mutex::new(None),
            health_log: Mutex::new(HealthLog::default()),
            held: ArcSwap::from_pointee(HeldLayout::default()),
            withholding: ArcSwap::from_pointee(Withholding::none()),
            recent_grants: Mutex::new(VecDeque::new()),
            refresh_cost_nanos: AtomicU64::new(0),
        })
    }

    /// Runs the first discovery and health and publishes their device
    /// set; fails (naming the config file, guest and hook) when the
    /// hardware cannot be read or a guest fails, and then nothing is
    /// published. Blocking. Returns the scan's warnings.
    pub fn first_scan(&self) -> Result<Vec<String>, ResourceError> {
        let refreshed = self.compute(Mode::Strict)?;
        let warnings = refreshed.warnings.clone();
        *self.warnings.lock().unwrap_or_else(PoisonError::into_inner) =
            warnings.iter().cloned().collect();
        self.publish(refreshed);
        self.scanned.send_replace(true);
        Ok(warnings)
    }

    /// Whether the first scan has published the device set.
    pub fn is_scanned(&self) -> bool {
        *self.scanned.borrow()
    }

    /// Resolves once the first scan has published the device set (at
    /// once after it); never when that scan failed, whose host stops.
    pub async fn wait_first_scan(&self) {
        let mut scanned = self.scanned.subscribe();
        // The sender lives as long as `self`: waiting cannot fail here.
        let _ = scanned.wait_for(|done| *done).await;
    }

    /// The extended resource name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where hardware is read.
    pub fn root(&self) -> &HostRoot {
        &self.root
    }

    /// The spec being served.
    pub fn spec(&self) -> Arc<ResourceSpec> {
        self.spec.load_full()
    }

    /// The device set being advertised.
    pub fn devices(&self) -> SharedDeviceSet {
        self.devices.borrow().clone()
    }

    /// Whether the device-plugin server offers `GetPreferredAllocation`:
    /// as `get-preferred-allocation` says when set; otherwise when a guest
    /// implements the hook, or when the hardware present lies on more than
    /// one NUMA node (the built-in packs onto one; health does not count,
    /// so a flapping device never changes it). Anything else would be a
    /// round trip per container that the kubelet's own choice makes as
    /// well. Never for a DRA resource.
    pub fn offers_preferred_allocation(&self) -> bool {
        self.offer_decided_without_devices()
            .unwrap_or_else(|| crate::builtin::packing_helps(&self.present_candidates()))
    }

    /// The `GetPreferredAllocation` offer where the configuration or a
    /// guest decides it (never for DRA, as `get-preferred-allocation`
    /// says, offered where a guest implements the hook); `None` where the
    /// devices decide it.
    fn offer_decided_without_devices(&self) -> Option<bool> {
        let spec = self.spec();
        if spec.config.api == ServingApi::Dra {
            return Some(false);
        }
        spec.config.get_preferred_allocation.or_else(|| {
            spec.bound(Hook::PreferredAllocation)
                .is_some()
                .then_some(true)
        })
    }

    /// Whether the first registration must wait for the first scan: the
    /// `GetPreferredAllocation` offer the kubelet reads when it registers
    /// the resource follows the devices
    /// ([`Resource::offers_preferred_allocation`]) on a node of more than
    /// one NUMA node, so only the scan can decide it. Registering before
    /// would register twice at every start of such a node. Never once
    /// scanned, nor where the configuration or a guest decides the offer.
    pub fn registration_waits_for_scan(&self) -> bool {
        !self.is_scanned()
            && self.offer_decided_without_devices().is_none()
            && wdp_hardware::numa_nodes(&self.root).len() > 1
    }

    /// The candidates present at the latest refresh.
    pub(crate) fn present_candidates(&self) -> Arc<Vec<Candidate>> {
        self.present.load_full()
    }

    /// A receiver that sees every new device set.
    pub fn subscribe(&self) -> watch::Receiver<SharedDeviceSet> {
        self.devices.subscribe()
    }

    /// The resource pipeline's metric families.
    pub(crate) fn metrics(&self) -> &Arc<ResourceMetrics> {
        &self.metrics
    }

    /// Computes what `spec` would advertise, without publishing anything:
    /// a reload's check before the swap; answers that device set. Blocking.
    pub fn dry_run(&self, spec: &ResourceSpec) -> Result<SharedDeviceSet, ResourceError> {
        let mut scratch = self
            .discovery
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let held = self.held.load();
        pipeline::run(
            spec,
            &self.root,
            None,
            &self.caller,
            &mut scratch,
            &held,
            Mode::Strict,
        )
        .map(|refreshed| refreshed.set)
    }

    /// Records what the DRA driver's prepared claims hold (all of them,
    /// each time they change): from now on no layout may move a held name
    /// to other hardware (see the `held` module). The hardware each held
    /// name means is read from the layout being served.
    pub fn hold<'a>(&self, devices: impl IntoIterator<Item = &'a HeldDevice>) {
        let held = HeldLayout::new(devices, self.devices().dra());
        if **self.held.load() != held {
            self.held.store(Arc::new(held));
        }
    }

    /// Withholds devices from now on ([`Withholding`]): the set
    /// being served is published again with them withheld (the
    /// device-plugin API reports them `Unhealthy`, the DRA driver leaves
    /// them out of its slices, and admissions refuse them). Logged when it
    /// changes.
    pub fn set_withholding(&self, withholding: Withholding) {
        if **self.withholding.load() == withholding {
            return;
        }
        let total = self.devices().devices_advertised().len();
        if withholding.is_empty() {
            tracing::info!(resource = %self.name, "no device withheld any more");
        } else {
            tracing::info!(resource = %self.name, withheld = withholding.count(total), devices = total, reason = %withholding.reason, "devices withheld");
        }
        self.metrics
            .set_withheld(&self.name, withholding.count(total));
        let withholding = Arc::new(withholding);
        self.withholding.store(withholding.clone());
        self.devices.send_modify(|current| {
            *current = Arc::new((**current).clone().with_withholding(withholding));
        });
    }

    /// Remembers that an `Allocate` answer gave these device IDs.
    pub(crate) fn record_grant(&self, device_ids: Vec<String>) {
        let mut grants = self
            .recent_grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if grants.len() == RECENT_GRANTS {
            grants.pop_front();
        }
        grants.push_back((Instant::now(), device_ids));
    }

    /// The device IDs `Allocate` answers gave in the last `within` (of
    /// the latest 1,024 answers): devices a container may hold that the
    /// kubelet does not list as held yet.
    pub fn granted_within(&self, within: Duration) -> BTreeSet<String> {
        self.recent_grants
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(at, _)| at.elapsed() <= within)
            .flat_map(|(_, ids)| ids.iter().cloned())
            .collect()
    }

    /// The devices withheld now.
    pub fn withholding(&self) -> Arc<Withholding> {
        self.withholding.load_full()
    }

    /// Swaps in a new spec (config and guests) atomically. In-flight calls
    /// finish with the spec they loaded; a refresh follows at once.
    pub fn replace_spec(&self, spec: ResourceSpec) {
        self.spec.store(Arc::new(spec));
        self.refresh_wanted.notify_one();
    }

    /// Takes the hardware watches away (the resource is stopping): their
    /// inotify marks go now, so the kernel's grace period for them
    /// overlaps the rest of the shutdown instead of delaying the exit.
    pub fn stop_watching(&self) {
        if let Some(watcher) = &self.hardware {
            watcher.set_paths(&[]);
        }
    }

    /// Asks the refresh loop to run now.
    pub fn request_refresh(&self) {
        self.refresh_wanted.notify_one();
    }

    /// Rescans hardware and reruns discovery and health; publishes a new
    /// device set when anything changed (returns whether it did). Failures
    /// keep the last good state; warnings are logged when they appear and
    /// when they clear. Blocking.
    pub fn refresh(&self) -> bool {
        match self.compute(Mode::Serving) {
            Ok(refreshed) => {
                self.log_warning_changes(&refreshed.warnings);
                self.publish(refreshed)
            }
            Err(error) => {
                self.log_warning_changes(&[error.to_string()]);
                false
            }
        }
    }

    fn compute(&self, mode: Mode) -> Result<Refreshed, ResourceError> {
        let started = Instant::now();
        let guests_before = self.caller.blocking_time();
        let spec = self.spec.load_full();
        let mut state = self
            .discovery
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = self.held.load_full();
        let listings = self.hardware.as_ref().map(ChangeWatcher::listings);
        let mut result = pipeline::run(
            &spec,
            &self.root,
            listings,
            &self.caller,
            &mut state,
            &held,
            mode,
        );
        // A claim prepared while the run was under way holds names the
        // run's layout check did not know of: checked again, the set
        // refused (the last good one kept, the next run asking the guest
        // again) should it move one.
        let now = self.held.load();
        if !Arc::ptr_eq(&held, &now)
            && let Ok(refreshed) = &result
            && let Err(problem) = now.check(&refreshed.set.dra().layout())
        {
            result = Err(ResourceError::Discovery {
                file: spec.config.file.clone(),
                problem: format!("the dra-layout answer just taken: {problem}"),
            });
            state.set = self.devices();
            self.refresh_wanted.notify_one();
        }
        // The host's own work only: time waiting for discovery and health
        // guests (bounded by their deadlines) does not slow polling down.
        let guests = self.caller.blocking_time().saturating_sub(guests_before);
        let cost =
            u64::try_from(started.elapsed().saturating_sub(guests).as_nanos()).unwrap_or(u64::MAX);
        self.refresh_cost_nanos.store(cost, Ordering::Relaxed);
        result
    }

    /// One WARN per warning that appears, one INFO when it clears.
    fn log_warning_changes(&self, now: &[String]) {
        let now: BTreeSet<String> = now.iter().cloned().collect();
        let mut last = self.warnings.lock().unwrap_or_else(PoisonError::into_inner);
        for warning in now.difference(&last) {
            tracing::warn!(resource = %self.name, %warning, "resource problem; the last good state keeps serving where it must");
        }
        for warning in last.difference(&now) {
            tracing::info!(resource = %self.name, %warning, "resource problem cleared");
        }
        *last = now;
    }

    fn publish(&self, refreshed: Refreshed) -> bool {
        if let Some(watcher) = &self.hardware {
            for warning in watcher.set_paths(&refreshed.watch_paths) {
                tracing::debug!(resource = %self.name, %warning, "hardware watch");
            }
        }
        self.present.store(refreshed.present);
        let withholding = self.withholding.load_full();
        let set = if *refreshed.set.withholding() == withholding {
            refreshed.set
        } else {
            Arc::new((*refreshed.set).clone().with_withholding(withholding))
        };
        let healthy = set.healthy_count();
        let unhealthy = set.len() - healthy;
        let mut previous = None;
        let changed = self.devices.send_if_modified(|current| {
            if Arc::ptr_eq(current, &set) || **current == *set {
                false
            } else {
                previous = Some(std::mem::replace(current, set.clone()));
                true
            }
        });
        self.metrics.set_devices(&self.name, healthy, unhealthy);
        self.write_cdi_spec();
        if changed && healthy + unhealthy >= TRIM_AFTER_DEVICES {
            // The previous set and this run's scratch are free now:
            // megabytes for a large resource, which the allocator would keep.
            // An unchanged run frees only scratch the next run reuses: no
            // trim (a millisecond per poll while idle).
            wdp_memory::release_free_memory();
        }
        self.log_health(previous.as_deref(), &set, healthy, unhealthy);
        changed
    }

    /// Logs the health changes from `previous` (when the set changed) to
    /// `set`, rate-limited per device ([`HealthLog`]), and the lines of
    /// devices whose left-out changes are due. "device list changed" is
    /// INFO when it comes with health lines, DEBUG otherwise (a flapping
    /// device would repeat it at every change).
    fn log_health(
        &self,
        previous: Option<&DeviceSet>,
        set: &DeviceSet,
        healthy: usize,
        unhealthy: usize,
    ) {
        let now = Instant::now();
        let lines = {
            let mut log = self
                .health_log
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let mut lines = match previous {
                Some(previous) => log.changes(previous, set, now),
                None => Vec::new(),
            };
            lines.extend(log.catch_up(set, now));
            lines
        };
        if previous.is_some() {
            if lines.is_empty() {
                tracing::debug!(resource = %self.name, healthy, unhealthy, "device list changed");
            } else {
                tracing::info!(resource = %self.name, healthy, unhealthy, "device list changed");
            }
        }
        for line in &lines {
            let message = line.message();
            match line {
                HealthLine::Healthy { id, .. } => {
                    tracing::info!(resource = %self.name, device = %id, "{message}");
                }
                HealthLine::Unhealthy { id, .. } => {
                    tracing::warn!(resource = %self.name, device = %id, "{message}");
                }
                HealthLine::More(_) => tracing::warn!(resource = %self.name, "{message}"),
            }
        }
    }

    /// Writes the resource's CDI spec when it differs from the last one
    /// written; removes it when `cdi` was turned off.
    fn write_cdi_spec(&self) {
        let Some(dir) = &self.cdi_dir else { return };
        let spec = self.spec.load();
        // A spec names at least one device (the CDI schema says so): a
        // resource with none has no spec until it has devices again.
        let set = self.devices.borrow().clone();
        let wanted = (spec.config.cdi != CdiMode::Off && !set.is_empty())
            .then(|| cdi_spec::cdi_spec(&spec.config, &set));
        let mut written = self
            .cdi_written
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *written == wanted {
            return;
        }
        let result = match &wanted {
            Some(written_spec) => wdp_cdi::write(dir, &self.name, written_spec).map(drop),
            None => wdp_cdi::remove(dir, &self.name),
        };
        match result {
            Ok(()) => *written = wanted,
            Err(error) => {
                tracing::warn!(resource = %self.name, dir = %dir.display(), %error, "cannot write the CDI spec; retrying at the next refresh")
            }
        }
    }

    /// Refreshes on every hardware event, poll tick or request until
    /// `shutdown`; each refresh runs on a blocking thread.
    ///
    /// Polling never takes more than about 1/`POLL_COST_FACTOR` of a
    /// core: when a refresh takes long (tens of thousands of devices), the
    /// next poll waits that many times its duration if that is longer than
    /// `poll-interval-ms`. Hardware events and requests still refresh at once.
    pub async fn refresh_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let taken = self
            .changes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut changes = taken.or_else(|| self.hardware.as_ref().map(ChangeWatcher::subscribe));
        loop {
            let last_cost = Duration::from_nanos(self.refresh_cost_nanos.load(Ordering::Relaxed));
            let interval = poll_wait(self.spec().config.poll_interval, last_cost);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
                _ = self.refresh_wanted.notified() => {}
                alive = async { changes.as_mut()?.changed().await.then_some(()) }, if changes.is_some() => {
                    if alive.is_none() {
                        changes = None;
                    }
                }
            }
            let me = self.clone();
            if let Err(error) = tokio::task::spawn_blocking(move || me.refresh()).await {
                tracing::error!(resource = %self.name, %error, "refresh panicked; the last device list keeps serving");
            }
        }
    }
}

/// From this many advertised devices on, a refresh hands the memory it
/// freed back to the kernel ([`wdp_memory::release_free_memory`], about a
/// millisecond).
pub(crate) const TRIM_AFTER_DEVICES: usize = 1024;

/// How many times a refresh's duration the next poll waits at least.
pub(crate) const POLL_COST_FACTOR: u32 = 100;

/// The wait before the next poll: `interval`, or [`POLL_COST_FACTOR`]
/// times the last refresh's duration when that is longer.
fn poll_wait(interval: Duration, last_cost: Duration) -> Duration {
    interval.max(last_cost.saturating_mul(POLL_COST_FACTOR))
}

#[cfg(test)]
#[path = "resource_tests.rs"]
mod tests;
