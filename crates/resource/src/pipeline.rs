//! The discovery and health pipeline of one resource: scan the hardware
//! its selectors name, turn candidates into devices (discovery guest or
//! built-in), judge them (built-in presence rule refined by the health
//! guest), bound every size, and build the device set. Shared by
//! refreshes, first loads and reload dry runs.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use wdp_hardware::{AdminNodes, Candidate, HostRoot, ListingCache};
use wdp_policy::Hook;
use wdp_policy::types::{Device, DeviceFacts, DeviceNode, Verdict};

use crate::admin_grants;
use crate::builtin;
use crate::companions;
use crate::convert::guest_candidate;
use crate::device_set::{CandidateLookup, DeviceSet, SharedDeviceSet};
use crate::dra_layout::{self, DraExtras};
use crate::error::ResourceError;
use crate::guest_call::GuestCaller;
use crate::held::HeldLayout;
use crate::scan::{scan, watch_paths};
use crate::spec::ResourceSpec;
use crate::validate;
use wdp_config::limits::KUBELET_MAX_MESSAGE_BYTES;
use wdp_config::{CdiMode, OnError, ResourceConfig, ServingApi};

/// What the pipeline remembers between runs: shared handles only, so the
/// state of a 65,000-device resource costs no copy of any device.
#[derive(Clone, Debug, Default)]
pub(crate) struct DiscoveryState {
    /// The candidates of the latest scan (shared with the RPC path: one
    /// copy of each candidate's facts, however many readers).
    pub present: Arc<Vec<Candidate>>,
    /// Candidates seen since the resource started but absent from the
    /// latest scan, with their last known facts.
    pub gone: BTreeMap<String, Candidate>,
    /// The latest device set built (the one advertised: an unchanged run
    /// hands back this very set). The last devices and verdicts are read
    /// from it ([`DeviceSet::devices_advertised`], [`DeviceSet::verdicts`])
    /// instead of being kept twice.
    pub set: SharedDeviceSet,
    /// The latest run, when it settled (see [`Settled`]).
    pub settled: Option<Settled>,
}

/// A run that changed nothing and read nothing besides its scan and the
/// administrative node numbers: no guest, no companion, the device-plugin
/// API. Its answer depends on nothing else, so a later serving run whose
/// scan finds the very same candidates, under the same config and node
/// numbers, hands back the same set without building it again (a poll of
/// 1,024 unchanged nodes costs the scan alone).
#[derive(Clone, Debug)]
pub(crate) struct Settled {
    config: ResourceConfig,
    admin: AdminNodes,
    /// The warnings of the stages after the scan.
    warnings: Vec<String>,
    watch_paths: Vec<PathBuf>,
}

/// Every candidate a run knows: the present ones (by index) and the gone
/// ones, looked up by ID.
struct Known<'a> {
    present: &'a [Candidate],
    by_id: HashMap<&'a str, usize>,
    gone: &'a BTreeMap<String, Candidate>,
}

/// Positions of `candidates` by ID.
fn index(candidates: &[Candidate]) -> HashMap<&str, usize> {
    candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect()
}

impl Known<'_> {
    fn is_present(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }
}

impl CandidateLookup for Known<'_> {
    fn candidate(&self, id: &str) -> Option<&Candidate> {
        match self.by_id.get(id) {
            Some(&i) => Some(&self.present[i]),
            None => self.gone.get(id),
        }
    }
}

/// One run's result.
#[derive(Debug)]
pub(crate) struct Refreshed {
    /// What to advertise: the previous set itself when nothing changed
    /// (same generation, no second copy).
    pub set: SharedDeviceSet,
    /// Problems of the hardware scan (guest failures are logged where
    /// they happen).
    pub warnings: Vec<String>,
    /// The host paths to watch for changes (gone hardware included, so
    /// its return is an event too).
    pub watch_paths: Vec<PathBuf>,
    /// The candidates present now (what guests may read during RPCs).
    pub present: Arc<Vec<Candidate>>,
}

/// How a run treats failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// First load and reload dry runs: any failure refuses the config.
    Strict,
    /// Serving: failures fall back (per `on-error`) and become warnings.
    Serving,
}

/// Runs the pipeline for `spec`, updating `state`; a DRA layout may not
/// move what `held` names to other hardware. The stages, in order: the
/// hardware scan ([`scan`]), discovery ([`discover`]), health
/// ([`health`]), companions and administrative nodes ([`companion_nodes`]),
/// the DRA layout and taints ([`dra_extras`]), then the set is built and
/// checked against the kubelet's message limit. A serving run whose scan
/// finds what the last, [`Settled`] run found stops after the scan and
/// hands back that run's set. A serving run's scan reads the directories
/// the resource's hardware watch covers through `listings`, when given
/// (read again only after a change under them); a strict run reads
/// everything.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    spec: &ResourceSpec,
    root: &HostRoot,
    listings: Option<&ListingCache>,
    caller: &GuestCaller,
    state: &mut DiscoveryState,
    held: &HeldLayout,
    mode: Mode,
) -> Result<Refreshed, ResourceError> {
    let file = &spec.config.file;
    let refuse = |problem: String| ResourceError::Discovery {
        file: file.clone(),
        problem,
    };
    let mut warnings = Vec::new();
    let listings = listings.filter(|_| mode == Mode::Serving);
    let (scanned, replicas) = scan(spec, root, listings, mode, &mut warnings)?;
    let scan_warnings = warnings.len();
    let admin = AdminNodes::read(root);
    if mode == Mode::Serving
        && let Some(rerun) = settled_rerun(spec, state, &admin, &scanned, &mut warnings)
    {
        return Ok(rerun);
    }
    // The last run's devices, read back from its set.
    let last_devices = state.set.devices_advertised();
    let present: Arc<Vec<Candidate>> = Arc::new(scanned);
    let by_id = index(&present);
    let gone = gone_now(state, &by_id);
    let known = Known {
        present: &present,
        by_id,
        gone: &gone,
    };

    let stages = Stages {
        spec,
        caller,
        present: &present,
        known: &known,
        mode,
    };
    let devices = stages.discover(&replicas, &last_devices).map_err(refuse)?;
    let mut verdicts = stages.health(&devices, &state.set).map_err(refuse)?;
    let companions = companion_nodes(
        &stages,
        root,
        &admin,
        &devices,
        &mut verdicts,
        &mut warnings,
    )
    .map_err(refuse)?;
    if spec.config.cdi != CdiMode::Off
        && let Some(problem) = devices
            .iter()
            .find_map(|d| wdp_cdi::names::check_device_name(&d.id).err())
    {
        return Err(refuse(problem));
    }
    let dra = if spec.config.api == ServingApi::Dra {
        dra_extras(&stages, state.set.dra(), held, &devices).map_err(refuse)?
    } else {
        Arc::default()
    };
    let set = DeviceSet::build(&devices, &verdicts, &known)
        .with_companions(companions)
        .with_dra(dra);
    check_message_size(&set).map_err(refuse)?;
    let watch_paths = watch_paths(spec, root, &present, &gone);
    drop(known);
    drop((devices, verdicts, last_devices));
    let outcome = Outcome {
        admin,
        warnings: warnings[scan_warnings..].to_vec(),
        watch_paths: watch_paths.clone(),
        present: Arc::clone(&present),
        gone,
    };
    let set = keep_outcome(spec, state, set, outcome);
    Ok(Refreshed {
        set,
        warnings,
        watch_paths,
        present,
    })
}

/// A serving run whose scan found what the last, settled run found (no
/// guest, the same config and administrative nodes): that run's set and
/// watch paths, its warnings added to `warnings`.
fn settled_rerun(
    spec: &ResourceSpec,
    state: &DiscoveryState,
    admin: &AdminNodes,
    scanned: &Vec<Candidate>,
    warnings: &mut Vec<String>,
) -> Option<Refreshed> {
    let settled = state.settled.as_ref()?;
    let same = spec.guests.is_empty()
        && settled.config == spec.config
        && settled.admin == *admin
        && *state.present == *scanned;
    if !same {
        return None;
    }
    warnings.extend(settled.warnings.iter().cloned());
    Some(Refreshed {
        set: Arc::clone(&state.set),
        warnings: std::mem::take(warnings),
        watch_paths: settled.watch_paths.clone(),
        present: Arc::clone(&state.present),
    })
}

/// The candidates seen since the resource started that the scan indexed
/// in `present_ids` does not find: those of the previous scan absent now
/// join the ones gone before; those back again leave.
fn gone_now(
    state: &DiscoveryState,
    present_ids: &HashMap<&str, usize>,
) -> BTreeMap<String, Candidate> {
    let mut gone = state.gone.clone();
    gone.retain(|id, _| !present_ids.contains_key(id.as_str()));
    for c in state.present.iter() {
        if !present_ids.contains_key(c.id.as_str()) {
            gone.insert(c.id.clone(), c.clone());
        }
    }
    gone
}

/// Refuses a set whose `ListAndWatch` message would exceed the kubelet's
/// receive limit.
fn check_message_size(set: &DeviceSet) -> Result<(), String> {
    let size = set.list_encoded_len();
    if size > KUBELET_MAX_MESSAGE_BYTES {
        return Err(format!(
            "{} devices make a {size}-byte ListAndWatch message, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte limit",
            set.len()
        ));
    }
    Ok(())
}

/// What a run found besides its set, kept in the state for the next one.
struct Outcome {
    admin: AdminNodes,
    /// The warnings after the scan's (a settled rerun repeats them).
    warnings: Vec<String>,
    watch_paths: Vec<PathBuf>,
    present: Arc<Vec<Candidate>>,
    gone: BTreeMap<String, Candidate>,
}

/// Keeps the run's `set` and `outcome` in `state` and answers the set to
/// advertise: the one advertised already when nothing changed (it keeps
/// its generation), which settles a run that reads nothing but its scan.
fn keep_outcome(
    spec: &ResourceSpec,
    state: &mut DiscoveryState,
    set: DeviceSet,
    outcome: Outcome,
) -> SharedDeviceSet {
    let unchanged = *state.set == set;
    let set = if unchanged {
        Arc::clone(&state.set)
    } else {
        Arc::new(set)
    };
    let settles = unchanged
        && spec.guests.is_empty()
        && spec.config.companions.is_empty()
        && spec.config.api == ServingApi::DevicePlugin;
    state.settled = settles.then(|| Settled {
        config: spec.config.clone(),
        admin: outcome.admin,
        warnings: outcome.warnings,
        watch_paths: outcome.watch_paths,
    });
    state.present = outcome.present;
    state.gone = outcome.gone;
    state.set = Arc::clone(&set);
    set
}

/// What every guest stage of one run reads: the spec and its guests, the
/// candidates present and known, and how failures count.
struct Stages<'a> {
    spec: &'a ResourceSpec,
    caller: &'a GuestCaller,
    present: &'a Arc<Vec<Candidate>>,
    known: &'a Known<'a>,
    mode: Mode,
}

impl Stages<'_> {
    /// Discovery: the guest's answer, or one device per candidate; devices
    /// whose hardware vanished kept (listed Unhealthy later), all in ID
    /// order with gone ones in their place.
    fn discover(&self, replicas: &[u32], last_devices: &[Device]) -> Result<Vec<Device>, String> {
        let (spec, present, known) = (self.spec, self.present, self.known);
        let mut devices = match spec.bound(Hook::Discovery) {
            None => builtin::discovery(present, replicas),
            Some((binding, guest)) => {
                let input: Vec<_> = present.iter().map(|c| guest_candidate(c, true)).collect();
                let outcome = self.caller.call_blocking(
                    spec,
                    binding,
                    guest,
                    present.clone(),
                    |g, ctx| g.discover(ctx, &input),
                    |answer| validate::devices(answer, known),
                );
                match outcome {
                    Ok(answer) => answer,
                    Err(failure) if self.mode == Mode::Strict => return Err(failure.to_string()),
                    // Logged once per change of state by the guest-call path.
                    Err(_) => match binding.on_error {
                        OnError::Builtin => builtin::discovery(present, replicas),
                        OnError::Fail => last_devices.to_vec(),
                    },
                }
            }
        };
        for d in &mut devices {
            d.replicas = d.replicas.max(1);
        }
        validate::devices(&devices, known)?;
        // A device whose hardware vanished stays listed (as Unhealthy) so
        // the kubelet and its pods learn about it, instead of silently
        // dropping out.
        for old in last_devices {
            let gone = old.candidates.iter().any(|c| !known.is_present(c));
            if gone && !devices.iter().any(|d| d.id == old.id) {
                devices.push(old.clone());
            }
        }
        // Health, layout and taint guests see the devices in ID order, gone
        // ones in their place: a device that goes neither moves the others
        // nor moves itself (a guest naming things by position keeps its
        // names).
        if !devices.is_sorted_by(|a, b| a.id <= b.id) {
            devices.sort_by(|a, b| a.id.cmp(&b.id));
        }
        validate::devices(&devices, known)?;
        Ok(devices)
    }

    /// Health: the built-in presence rule, refined by the guest's
    /// verdicts; a failing guest keeps its `last` verdicts (`on-error =
    /// "fail"`) for devices whose hardware is still there.
    fn health(
        &self,
        devices: &[Device],
        last: &DeviceSet,
    ) -> Result<BTreeMap<String, Verdict>, String> {
        let known = self.known;
        let mut verdicts: BTreeMap<String, Verdict> = devices
            .iter()
            .map(|d| (d.id.clone(), builtin::verdict(d, |c| known.is_present(c))))
            .collect();
        let Some((binding, guest)) = self.spec.bound(Hook::Health) else {
            return Ok(verdicts);
        };
        let facts = device_facts(devices, known);
        let defaults = &verdicts;
        let outcome = self.caller.call_blocking(
            self.spec,
            binding,
            guest,
            self.present.clone(),
            |g, ctx| g.check_health(ctx, &facts),
            |answer| validate::verdicts(answer, defaults),
        );
        match outcome {
            Ok(list) => {
                for v in list {
                    verdicts.insert(v.id.clone(), v);
                }
            }
            Err(failure) if self.mode == Mode::Strict => return Err(failure.to_string()),
            // Logged once per change of state by the guest-call path.
            Err(_) if binding.on_error == OnError::Fail => {
                // Vanished hardware is Unhealthy whatever the guest said
                // before.
                let last_verdicts = last.verdicts();
                let hardware_present =
                    |d: &Device| d.candidates.iter().all(|c| known.is_present(c));
                for d in devices.iter().filter(|d| hardware_present(d)) {
                    if let Some(last) = last_verdicts.get(d.id.as_str()) {
                        verdicts.insert(d.id.clone(), last.clone());
                    }
                }
            }
            Err(_) => {}
        }
        Ok(verdicts)
    }
}

/// The companion nodes every container gets, administrative ones the
/// resource does not grant left out (refusing a strict run; otherwise a
/// warning, and the device holding one Unhealthy); a required companion
/// missing makes every device Unhealthy (a container could not use them),
/// whatever health said.
fn companion_nodes(
    stages: &Stages<'_>,
    root: &HostRoot,
    admin: &AdminNodes,
    devices: &[Device],
    verdicts: &mut BTreeMap<String, Verdict>,
    warnings: &mut Vec<String>,
) -> Result<Vec<DeviceNode>, String> {
    let spec = stages.spec;
    let mut companions = companions::resolve(root, &spec.config.companions, stages.present);
    let refused = admin_grants::screen(
        admin,
        &spec.config.admin_grants,
        stages.present,
        &mut companions.nodes,
        devices,
    );
    if let Some(first) = refused.first()
        && stages.mode == Mode::Strict
    {
        return Err(first.1.clone());
    }
    for (device, reason) in refused {
        warnings.push(reason.clone());
        if let Some(device) = device
            && let Some(verdict) = verdicts.get_mut(&device)
        {
            verdict.healthy = false;
            verdict.reason = reason;
        }
    }
    if !companions.missing.is_empty() {
        let reason = companions.missing.join("; ");
        warnings.extend(companions.missing.iter().cloned());
        for verdict in verdicts.values_mut() {
            verdict.healthy = false;
            verdict.reason = reason.clone();
        }
    }
    Ok(companions.nodes)
}

/// The facts a `health` or `device-taints` guest receives.
fn device_facts(devices: &[Device], known: &Known<'_>) -> Vec<DeviceFacts> {
    devices
        .iter()
        .map(|d| DeviceFacts {
            device: d.clone(),
            candidates: d
                .candidates
                .iter()
                .filter_map(|id| known.candidate(id))
                .map(|c| guest_candidate(c, known.is_present(&c.id)))
                .collect(),
        })
        .collect()
}

/// The DRA layout and taints of `devices`, from the `dra-layout` and
/// `device-taints` guests (none without them; a taints guest exporting
/// `device-taints-v2` is asked through it). A failing or refused call
/// keeps the last good answer while it still fits the devices (the
/// guest-call path logs the failure once); on a first load or a dry run it
/// refuses the resource. A layout that would move a name `held` by a
/// prepared claim to other hardware is refused like any invalid answer.
fn dra_extras(
    stages: &Stages<'_>,
    last: &Arc<DraExtras>,
    held: &HeldLayout,
    devices: &[Device],
) -> Result<Arc<DraExtras>, String> {
    let (spec, caller, present, known, mode) = (
        stages.spec,
        stages.caller,
        stages.present,
        stages.known,
        stages.mode,
    );
    let mut extras = DraExtras::default();
    if let Some((binding, guest)) = spec.bound(Hook::DraLayout) {
        let outcome = caller.call_blocking(
            spec,
            binding,
            guest,
            present.clone(),
            |g, ctx| g.describe_layout(ctx, devices),
            |answer| dra_layout::check_layout(answer, devices).and_then(|()| held.check(answer)),
        );
        extras = match outcome {
            Ok(layout) => DraExtras::from_layout(layout),
            Err(failure) if mode == Mode::Strict => return Err(failure.to_string()),
            Err(_) => {
                let mut kept = DraExtras::from_layout(last.layout());
                if dra_layout::check_layout(&last.layout(), devices).is_err() {
                    tracing::warn!(resource = %spec.config.resource, "the last good DRA layout no longer fits the devices: publishing whole devices until the dra-layout guest answers again");
                    kept = DraExtras::default();
                }
                kept
            }
        };
    }
    if let Some((binding, guest)) = spec.bound(Hook::DeviceTaints) {
        let facts = device_facts(devices, known);
        // `device-taints-v2` when the guest exports it, never both.
        let hook = guest.taint_hook().unwrap_or(Hook::DeviceTaints);
        let outcome = caller.call_blocking(
            spec,
            binding,
            guest,
            present.clone(),
            |g, ctx| g.taints(ctx, &facts),
            |answer| dra_layout::check_taints(answer, devices, hook),
        );
        extras.taint_source = Some(dra_layout::TaintSource {
            resource: spec.config.resource.clone(),
            guest: guest.name().to_owned(),
            hook,
        });
        extras.taints = match outcome {
            Ok(answer) => answer
                .into_iter()
                .filter(|t| !t.taints.is_empty())
                .map(|t| (t.id, t.taints))
                .collect(),
            Err(failure) if mode == Mode::Strict => return Err(failure.to_string()),
            Err(_) => last
                .taints
                .iter()
                .filter(|(id, _)| devices.iter().any(|d| &d.id == *id))
                .map(|(id, taints)| (id.clone(), taints.clone()))
                .collect(),
        };
    }
    if extras == **last {
        return Ok(Arc::clone(last));
    }
    Ok(Arc::new(extras))
}
