//! The decisions behind a container's admission, whichever protocol asks
//! (the device-plugin RPCs, a DRA prepare): check the request against the
//! advertised set, ask the guest (or the built-in policy), validate the
//! answer, and apply the hook's `on-error` policy. Everything read here
//! comes from the swap point; nothing waits for a refresh.

use std::collections::HashSet;

use wdp_policy::Hook;
use wdp_policy::types::{DeviceNode, DeviceRef};

use crate::admin_grants;
use crate::admission_error::AdmissionError;
use crate::builtin;
use crate::device_set::{AdvertisedDevice, DeviceSet};
use crate::grant::ContainerGrant;
use crate::guest_call::GuestFailure;
use crate::resource::Resource;
use crate::spec::ResourceSpec;
use crate::validate;
use wdp_config::{CdiMode, HookBinding, OnError};

impl Resource {
    /// `GetPreferredAllocation` for one container. Works on positions in
    /// the device set: no device is copied, the built-in compares no ID,
    /// and a guest exporting `preferred-allocation-indexed` receives the
    /// set once per generation and then only positions.
    pub async fn preferred(
        &self,
        available: &[String],
        must_include: &[String],
        size: i32,
    ) -> Result<Vec<String>, AdmissionError> {
        let set = self.devices();
        let spec = self.spec();
        let available_at = set
            .resolve_indexes(available, true)
            .map_err(AdmissionError::InvalidRequest)?;
        let must_at = set
            .resolve_indexes(must_include, true)
            .map_err(AdmissionError::InvalidRequest)?;
        let mut is_available = vec![false; set.len()];
        for &i in &available_at {
            is_available[i as usize] = true;
        }
        if let Some(i) = must_at.iter().position(|&m| !is_available[m as usize]) {
            return Err(AdmissionError::InvalidRequest(format!(
                "must-include device {:?} is not among the available devices",
                must_include[i]
            )));
        }
        let size = usize::try_from(size).map_err(|_| {
            AdmissionError::InvalidRequest(format!("allocation_size {size} is negative"))
        })?;
        if size > available.len() || size < must_include.len() {
            return Err(AdmissionError::InvalidRequest(format!(
                "allocation_size {size} cannot be met from {} available devices with {} must-include",
                available.len(),
                must_include.len()
            )));
        }
        let ids_of = |set: &DeviceSet, positions: Vec<u32>| -> Vec<String> {
            positions
                .into_iter()
                .map(|i| set.devices()[i as usize].id().to_owned())
                .collect()
        };
        let must_at_check = must_at.clone();
        let builtin = {
            let set = set.clone();
            let (available_at, must_at) = (available_at.clone(), must_at.clone());
            move || {
                ids_of(
                    &set,
                    builtin::preferred(set.devices(), &available_at, &must_at, size),
                )
            }
        };
        let Some((binding, guest)) = spec.bound(Hook::PreferredAllocation) else {
            return Ok(builtin());
        };
        let generation = set.generation();
        let for_call = set.clone();
        let for_check = set.clone();
        let outcome = self
            .caller
            .call_in_generation(
                Some(generation),
                &spec,
                binding,
                guest,
                self.present_candidates(),
                move |g, ctx| {
                    let table: Vec<&DeviceRef> =
                        for_call.devices().iter().map(|d| &d.device).collect();
                    let answer =
                        g.choose_by_index(ctx, &table, &available_at, &must_at, size as u32)?;
                    Ok(answer.into_positions(table.len(), |id| {
                        // At most MAX_DEVICES_PER_RESOURCE devices: fits u32.
                        for_call.position(id).map(|p| p as u32)
                    }))
                },
                // Checked as positions: the answer's length in work, no
                // ID compared or set built per call.
                move |answer| match answer {
                    Ok(positions) => {
                        validate::preferred(positions, &is_available, &must_at_check, size, |p| {
                            for_check.devices()[p as usize].id().to_owned()
                        })
                    }
                    Err(problem) => Err(problem.clone()),
                },
            )
            .await
            .map(|answer| ids_of(&set, answer.unwrap_or_default()));
        settle(binding, outcome, builtin)
    }

    /// `Allocate` for one container.
    pub async fn allocate(&self, ids: &[String]) -> Result<ContainerGrant, AdmissionError> {
        let set = self.devices();
        let spec = self.spec();
        let devices = set
            .resolve(ids, true)
            .map_err(AdmissionError::InvalidRequest)?;
        let mut default = builtin::allocate(&devices, set.companions(), &spec.config.permissions);
        if spec.config.cdi != CdiMode::Off {
            default.cdi_devices = ids
                .iter()
                .map(|id| wdp_cdi::device_name(&spec.config.resource, id))
                .collect();
            if spec.config.cdi == CdiMode::Names {
                default.devices.clear();
            }
        }
        let response = match spec.bound(Hook::Allocate) {
            None => ContainerGrant::from(default),
            Some((binding, guest)) => {
                let refs = refs(&devices);
                let guest_default = default.clone();
                let check = self.answer_check(&spec, &devices, set.companions());
                let outcome = self
                    .caller
                    .call_in_generation(
                        Some(set.generation()),
                        &spec,
                        binding,
                        guest,
                        self.present_candidates(),
                        move |g, ctx| {
                            g.allocate(ctx, &refs, &guest_default)
                                .map(ContainerGrant::from)
                        },
                        check,
                    )
                    .await;
                settle(binding, outcome, || ContainerGrant::from(default))?
            }
        };
        validate::message_size(&response).map_err(AdmissionError::AnswerTooLarge)?;
        self.metrics().allocated(self.name(), ids.len());
        self.record_grant(devices.iter().map(|d| d.device.device_id.clone()).collect());
        Ok(response)
    }

    /// `PreStartContainer`.
    pub async fn pre_start(&self, ids: &[String]) -> Result<(), AdmissionError> {
        let set = self.devices();
        let spec = self.spec();
        let devices = set
            .resolve_held(ids)
            .map_err(AdmissionError::InvalidRequest)?;
        let builtin_check = || -> Result<(), AdmissionError> {
            for d in &devices {
                for node in &d.device.nodes {
                    if !self
                        .root()
                        .resolve(std::path::Path::new(&node.path))
                        .exists()
                    {
                        return Err(AdmissionError::NodeGone {
                            device: d.id().to_owned(),
                            node: node.path.clone(),
                        });
                    }
                }
            }
            Ok(())
        };
        let Some((binding, guest)) = spec.bound(Hook::PreStart) else {
            return builtin_check();
        };
        let refs = refs(&devices);
        let outcome = self
            .caller
            .call_in_generation(
                Some(set.generation()),
                &spec,
                binding,
                guest,
                self.present_candidates(),
                move |g, ctx| g.pre_start(ctx, &refs),
                |()| Ok(()),
            )
            .await;
        match outcome {
            Ok(()) => Ok(()),
            Err(failure) if failure.is_refusal() => Err(AdmissionError::PreStartRefused(failure)),
            Err(failure) => match binding.on_error {
                OnError::Fail => Err(AdmissionError::GuestFailed(failure)),
                OnError::Builtin => builtin_check(),
            },
        }
    }
}

impl Resource {
    /// The check of an allocate guest's answer: [`validate::container_grant`],
    /// then no administrative node the resource does not grant
    /// ([`admin_grants::check_answer`]). The requested devices' nodes and
    /// the companions were judged at refresh and are not judged again.
    fn answer_check(
        &self,
        spec: &ResourceSpec,
        devices: &[&AdvertisedDevice],
        companions: &[DeviceNode],
    ) -> impl FnOnce(&ContainerGrant) -> Result<(), String> + Send + 'static {
        let screened: HashSet<String> = devices
            .iter()
            .flat_map(|d| &d.device.nodes)
            .chain(companions)
            .map(|node| node.path.clone())
            .collect();
        let root = self.root().clone();
        let grants = spec.config.admin_grants.clone();
        move |answer| {
            validate::container_grant(answer)?;
            admin_grants::check_answer(
                &root,
                &grants,
                &screened,
                answer.devices.iter().map(|d| d.host_path.as_str()),
                answer.mounts.iter().map(|m| m.host_path.as_str()),
            )
        }
    }
}

fn refs(devices: &[&AdvertisedDevice]) -> Vec<DeviceRef> {
    devices.iter().map(|d| d.device.clone()).collect()
}

/// Applies the binding's failure policy to a guest outcome.
fn settle<T>(
    binding: &HookBinding,
    outcome: Result<T, GuestFailure>,
    builtin: impl FnOnce() -> T,
) -> Result<T, AdmissionError> {
    match outcome {
        Ok(value) => Ok(value),
        Err(failure) => match binding.on_error {
            OnError::Fail => Err(AdmissionError::GuestFailed(failure)),
            OnError::Builtin => Ok(builtin()),
        },
    }
}
