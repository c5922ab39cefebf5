//! The discovery and health pipeline of one resource: scan the hardware
//! its selectors name, turn candidates into devices (discovery guest or
//! built-in), judge them (built-in presence rule refined by the health
//! guest), bound every size, and build the device set. Shared by
//! refreshes, first loads and reload dry runs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use wdp_hardware::{AdminNodes, Candidate, HostRoot, Selector};
use wdp_policy::Hook;
use wdp_policy::types::{Device, DeviceFacts, DeviceNode, Verdict};

use crate::admin_grants;
use crate::builtin;
use crate::companions;
use crate::config::{CdiMode, OnError, ServingApi};
use crate::convert::guest_candidate;
use crate::device_set::{CandidateLookup, DeviceSet, SharedDeviceSet};
use crate::dra_layout::{self, DraExtras};
use crate::error::ResourceError;
use crate::guest_call::GuestCaller;
use crate::held::HeldLayout;
use crate::limits::KUBELET_MAX_MESSAGE_BYTES;
use crate::spec::ResourceSpec;
use crate::validate;

/// What the pipeline remembers between runs: shared handles only, so the
/// state of a 65,000-device resource costs no copy of any device.
#[derive(Clone, Debug, Default)]
pub struct DiscoveryState {
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
pub struct Refreshed {
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
pub enum Mode {
    /// First load and reload dry runs: any failure refuses the config.
    Strict,
    /// Serving: failures fall back (per `on-error`) and become warnings.
    Serving,
}

/// Runs the pipeline for `spec`, updating `state`; a DRA layout may not
/// move what `held` names to other hardware.
pub fn run(
    spec: &ResourceSpec,
    root: &HostRoot,
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
    // The last run's devices and verdicts, read back from its set.
    let last_devices = state.set.devices_advertised();

    // The hardware scan, with each selector's replica count beside it.
    let mut scanned: Vec<Candidate> = Vec::new();
    let mut replicas: Vec<u32> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for (i, selector) in spec.config.selectors.iter().enumerate() {
        match wdp_hardware::discover(root, std::slice::from_ref(selector)) {
            Ok(scan) => {
                warnings.extend(scan.warnings);
                let count = spec.config.replicas.get(&i).copied().unwrap_or(1);
                for c in scan.candidates {
                    if seen.insert(c.id.clone()) {
                        scanned.push(c);
                        replicas.push(count);
                    }
                }
            }
            Err(source) if mode == Mode::Strict => {
                return Err(ResourceError::Hardware {
                    file: file.clone(),
                    source,
                });
            }
            Err(error) => warnings.push(format!("{}: {error}", describe(selector))),
        }
    }
    drop(seen);
    // Held until the next scan: no room left over from growing.
    scanned.shrink_to_fit();
    // Candidates of the previous scan that are absent now are remembered
    // as gone; those back again are not.
    let present: Arc<Vec<Candidate>> = Arc::new(scanned);
    let by_id = index(&present);
    let mut gone = state.gone.clone();
    gone.retain(|id, _| !by_id.contains_key(id.as_str()));
    for c in state.present.iter() {
        if !by_id.contains_key(c.id.as_str()) {
            gone.insert(c.id.clone(), c.clone());
        }
    }
    let known = Known {
        present: &present,
        by_id,
        gone: &gone,
    };

    // Discovery: the guest's answer, or one device per candidate.
    let mut devices = match spec.bound(Hook::Discovery) {
        None => builtin::discovery(&present, &replicas),
        Some((binding, guest)) => {
            let input: Vec<_> = present.iter().map(|c| guest_candidate(c, true)).collect();
            let known = &known;
            let outcome = caller.call_blocking(
                spec,
                binding,
                guest,
                present.clone(),
                |g, ctx| g.discover(ctx, &input),
                |answer| validate::devices(answer, known),
            );
            match outcome {
                Ok(answer) => answer,
                Err(failure) if mode == Mode::Strict => return Err(refuse(failure.to_string())),
                // Logged once per change of state by the guest-call path.
                Err(_) => match binding.on_error {
                    OnError::Builtin => builtin::discovery(&present, &replicas),
                    OnError::Fail => last_devices.clone(),
                },
            }
        }
    };
    for d in &mut devices {
        d.replicas = d.replicas.max(1);
    }
    validate::devices(&devices, &known).map_err(refuse)?;
    // A device whose hardware vanished stays listed (as Unhealthy) so the
    // kubelet and its pods learn about it, instead of silently dropping out.
    for old in &last_devices {
        let gone = old.candidates.iter().any(|c| !known.is_present(c));
        if gone && !devices.iter().any(|d| d.id == old.id) {
            devices.push(old.clone());
        }
    }
    // Health, layout and taint guests see the devices in ID order, gone
    // ones in their place: a device that goes neither moves the others
    // nor moves itself (a guest naming things by position keeps its names).
    if !devices.is_sorted_by(|a, b| a.id <= b.id) {
        devices.sort_by(|a, b| a.id.cmp(&b.id));
    }
    validate::devices(&devices, &known).map_err(refuse)?;

    // Health: the built-in presence rule, refined by the guest's verdicts.
    let hardware_present = |d: &Device| d.candidates.iter().all(|c| known.is_present(c));
    let mut verdicts: BTreeMap<String, Verdict> = devices
        .iter()
        .map(|d| (d.id.clone(), builtin::verdict(d, |c| known.is_present(c))))
        .collect();
    if let Some((binding, guest)) = spec.bound(Hook::Health) {
        let facts = device_facts(&devices, &known);
        let defaults = &verdicts;
        let outcome = caller.call_blocking(
            spec,
            binding,
            guest,
            present.clone(),
            |g, ctx| g.check_health(ctx, &facts),
            |answer| validate::verdicts(answer, defaults),
        );
        match outcome {
            Ok(list) => {
                for v in list {
                    verdicts.insert(v.id.clone(), v);
                }
            }
            Err(failure) if mode == Mode::Strict => return Err(refuse(failure.to_string())),
            // Logged once per change of state by the guest-call path.
            Err(_) => {
                if binding.on_error == OnError::Fail {
                    // A failing guest keeps its last verdicts, but only for
                    // devices whose hardware is still there: vanished
                    // hardware is Unhealthy whatever the guest said before.
                    let last_verdicts = state.set.verdicts();
                    for d in devices.iter().filter(|d| hardware_present(d)) {
                        if let Some(last) = last_verdicts.get(d.id.as_str()) {
                            verdicts.insert(d.id.clone(), last.clone());
                        }
                    }
                }
            }
        }
    }

    // Companions: a required one missing makes every device Unhealthy
    // (a container could not use them), whatever health said.
    let mut companions = companions::resolve(root, &spec.config.companions, &present);
    let refused = screen_admin_nodes(spec, root, &present, &mut companions.nodes, &devices);
    if let Some(first) = refused.first()
        && mode == Mode::Strict
    {
        return Err(refuse(first.1.clone()));
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

    if spec.config.cdi != CdiMode::Off
        && let Some(problem) = devices
            .iter()
            .find_map(|d| crate::cdi::check_device_name(&d.id).err())
    {
        return Err(refuse(problem));
    }
    let dra = if spec.config.api == ServingApi::Dra {
        dra_extras(
            spec,
            caller,
            state.set.dra(),
            held,
            &devices,
            &present,
            &known,
            mode,
        )
        .map_err(refuse)?
    } else {
        Arc::default()
    };
    let set = DeviceSet::build(&devices, &verdicts, &known)
        .with_companions(companions.nodes)
        .with_dra(dra);
    let size = set.list_encoded_len();
    if size > KUBELET_MAX_MESSAGE_BYTES {
        return Err(refuse(format!(
            "{} devices make a {size}-byte ListAndWatch message, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte limit",
            set.len()
        )));
    }
    // Gone hardware stays watched so its return is an event too.
    let mut selectors: Vec<Selector> = spec.config.selectors.clone();
    selectors.extend(spec.config.companions.iter().cloned().map(Selector::Nodes));
    let mut watch_paths = wdp_hardware::watch_paths(root, &selectors, &present);
    if !gone.is_empty() {
        let gone: Vec<Candidate> = gone.values().cloned().collect();
        watch_paths.extend(wdp_hardware::watch_paths(root, &[], &gone));
        watch_paths.sort();
        watch_paths.dedup();
    }
    drop(known);
    drop((devices, verdicts, last_devices));
    // Unchanged: the set being advertised stays, with its generation.
    let set = if *state.set == set {
        Arc::clone(&state.set)
    } else {
        Arc::new(set)
    };
    state.present = Arc::clone(&present);
    state.gone = gone;
    state.set = Arc::clone(&set);
    Ok(Refreshed {
        set,
        warnings,
        watch_paths,
        present,
    })
}

/// Administrative nodes (`wdp_hardware::AdminNodes`) the resource does not
/// grant, each with the sentence refusing it: a companion node (dropped
/// from `companions`, so no container and no CDI spec receives it) and the
/// devices whose candidates hold one (named, to be held back as
/// Unhealthy).
fn screen_admin_nodes(
    spec: &ResourceSpec,
    root: &HostRoot,
    present: &[Candidate],
    companions: &mut Vec<DeviceNode>,
    devices: &[Device],
) -> Vec<(Option<String>, String)> {
    let grants = &spec.config.admin_grants;
    let known = AdminNodes::read(root);
    let mut refused = Vec::new();
    companions.retain(
        |node| match admin_grants::first_refused(&known, grants, [node]) {
            Some(found) => {
                refused.push((None, admin_grants::refusal("companion node", &found)));
                false
            }
            None => true,
        },
    );
    let refused_candidates: HashMap<&str, String> = present
        .iter()
        .filter_map(|c| {
            let found = c
                .nodes
                .iter()
                .filter_map(|node| known.judge(node))
                .find(|found| !grants.contains(&found.kind))?;
            let via = format!("candidate {}'s node", c.id);
            Some((c.id.as_str(), admin_grants::refusal(&via, &found)))
        })
        .collect();
    if refused_candidates.is_empty() {
        return refused;
    }
    for device in devices {
        if let Some(reason) = device
            .candidates
            .iter()
            .find_map(|c| refused_candidates.get(c.as_str()))
        {
            refused.push((Some(device.id.clone()), reason.clone()));
        }
    }
    refused
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
/// `device-taints` guests (none without them). A failing or refused call
/// keeps the last good answer while it still fits the devices (the
/// guest-call path logs the failure once); on a first load or a dry run it
/// refuses the resource. A layout that would move a name `held` by a
/// prepared claim to other hardware is refused like any invalid answer.
#[allow(
    clippy::too_many_arguments,
    reason = "the run's inputs a layout is checked against"
)]
fn dra_extras(
    spec: &ResourceSpec,
    caller: &GuestCaller,
    last: &Arc<DraExtras>,
    held: &HeldLayout,
    devices: &[Device],
    present: &Arc<Vec<Candidate>>,
    known: &Known<'_>,
    mode: Mode,
) -> Result<Arc<DraExtras>, String> {
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
        let outcome = caller.call_blocking(
            spec,
            binding,
            guest,
            present.clone(),
            |g, ctx| g.device_taints(ctx, &facts),
            |answer| dra_layout::check_taints(answer, devices),
        );
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

fn describe(selector: &Selector) -> String {
    match selector {
        Selector::Nodes(n) => format!("nodes {}", n.path),
        Selector::Pci(_) => "pci selector".to_owned(),
        Selector::Usb(_) => "usb selector".to_owned(),
    }
}
