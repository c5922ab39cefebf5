//! The discovery and health pipeline of one resource: scan the hardware
//! its selectors name, turn candidates into devices (discovery guest or
//! built-in), judge them (built-in presence rule refined by the health
//! guest), bound every size, and build the device set. Shared by
//! refreshes, first loads and reload dry runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use prost::Message;
use wdp_hardware::{Candidate, HostRoot, Selector};
use wdp_policy::Hook;
use wdp_policy::types::{Device, DeviceFacts, Verdict};

use crate::builtin;
use crate::companions;
use crate::config::{CdiMode, OnError};
use crate::convert::guest_candidate;
use crate::device_set::DeviceSet;
use crate::error::HostError;
use crate::guest_call::GuestCaller;
use crate::limits::KUBELET_MAX_MESSAGE_BYTES;
use crate::spec::ResourceSpec;
use crate::validate;

/// What the pipeline remembers between runs.
#[derive(Clone, Debug, Default)]
pub struct DiscoveryState {
    /// Every candidate seen since the resource started, last known facts.
    pub known: BTreeMap<String, Candidate>,
    /// The last devices advertised.
    pub devices: Vec<Device>,
    /// The last health verdicts, by device ID.
    pub verdicts: BTreeMap<String, Verdict>,
}

/// One run's result.
#[derive(Debug)]
pub struct Refreshed {
    /// What to advertise.
    pub set: DeviceSet,
    /// Problems of the hardware scan (guest failures are logged where
    /// they happen).
    pub warnings: Vec<String>,
    /// Every candidate seen, present or gone (to watch for changes).
    pub watched: Vec<Candidate>,
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

/// Runs the pipeline for `spec`, updating `state`.
pub fn run(
    spec: &ResourceSpec,
    root: &HostRoot,
    caller: &GuestCaller,
    state: &mut DiscoveryState,
    mode: Mode,
) -> Result<Refreshed, HostError> {
    let file = &spec.config.file;
    let refuse = |problem: String| HostError::Discovery {
        file: file.clone(),
        problem,
    };
    let mut warnings = Vec::new();

    // The hardware scan, tagged with each selector's replica count.
    let mut tagged: Vec<(Candidate, u32)> = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, selector) in spec.config.selectors.iter().enumerate() {
        match wdp_hardware::discover(root, std::slice::from_ref(selector)) {
            Ok(scan) => {
                warnings.extend(scan.warnings);
                let replicas = spec.config.replicas.get(&i).copied().unwrap_or(1);
                for c in scan.candidates {
                    if seen.insert(c.id.clone()) {
                        tagged.push((c, replicas));
                    }
                }
            }
            Err(source) if mode == Mode::Strict => {
                return Err(HostError::Hardware {
                    file: file.clone(),
                    source,
                });
            }
            Err(error) => warnings.push(format!("{}: {error}", describe(selector))),
        }
    }
    for (c, _) in &tagged {
        state.known.insert(c.id.clone(), c.clone());
    }
    let present_ids = seen;
    let present: Arc<Vec<Candidate>> = Arc::new(tagged.iter().map(|(c, _)| c.clone()).collect());

    // Discovery: the guest's answer, or one device per candidate.
    let mut devices = match spec.bound(Hook::Discovery) {
        None => builtin::discovery(&tagged),
        Some((binding, guest)) => {
            let input: Vec<_> = tagged
                .iter()
                .map(|(c, _)| guest_candidate(c, true))
                .collect();
            let known = &state.known;
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
                    OnError::Builtin => builtin::discovery(&tagged),
                    OnError::Fail => state.devices.clone(),
                },
            }
        }
    };
    for d in &mut devices {
        d.replicas = d.replicas.max(1);
    }
    validate::devices(&devices, &state.known).map_err(refuse)?;
    // A device whose hardware vanished stays listed (as Unhealthy) so the
    // kubelet and its pods learn about it, instead of silently dropping out.
    for old in &state.devices {
        let gone = old.candidates.iter().any(|c| !present_ids.contains(c));
        if gone && !devices.iter().any(|d| d.id == old.id) {
            devices.push(old.clone());
        }
    }
    validate::devices(&devices, &state.known).map_err(refuse)?;

    // Health: the built-in presence rule, refined by the guest's verdicts.
    let hardware_present = |d: &Device| d.candidates.iter().all(|c| present_ids.contains(c));
    let mut verdicts: BTreeMap<String, Verdict> = devices
        .iter()
        .map(|d| (d.id.clone(), builtin::verdict(d, &present_ids)))
        .collect();
    if let Some((binding, guest)) = spec.bound(Hook::Health) {
        let facts: Vec<DeviceFacts> = devices
            .iter()
            .map(|d| DeviceFacts {
                device: d.clone(),
                candidates: d
                    .candidates
                    .iter()
                    .filter_map(|id| state.known.get(id))
                    .map(|c| guest_candidate(c, present_ids.contains(&c.id)))
                    .collect(),
            })
            .collect();
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
                    for d in devices.iter().filter(|d| hardware_present(d)) {
                        if let Some(last) = state.verdicts.get(&d.id) {
                            verdicts.insert(d.id.clone(), last.clone());
                        }
                    }
                }
            }
        }
    }

    // Companions: a required one missing makes every device Unhealthy
    // (a container could not use them), whatever health said.
    let companions = companions::resolve(root, &spec.config.companions, &present);
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
    let set = DeviceSet::build(&devices, &verdicts, &state.known).with_companions(companions.nodes);
    let size = set.to_list().encoded_len();
    if size > KUBELET_MAX_MESSAGE_BYTES {
        return Err(refuse(format!(
            "{} devices make a {size}-byte ListAndWatch message, above the kubelet's {KUBELET_MAX_MESSAGE_BYTES}-byte limit",
            set.len()
        )));
    }
    state.devices = devices;
    state.verdicts = verdicts;
    Ok(Refreshed {
        set,
        warnings,
        // Gone hardware stays watched so its return is an event too.
        watched: state.known.values().cloned().collect(),
        present,
    })
}

fn describe(selector: &Selector) -> String {
    match selector {
        Selector::Nodes(n) => format!("nodes {}", n.path),
        Selector::Pci(_) => "pci selector".to_owned(),
        Selector::Usb(_) => "usb selector".to_owned(),
    }
}
