//! `claim-echo`: a test guest for the `claim` import (WIT 0.1.1, devices
//! since 0.1.2).
//!
//! `allocate` returns the default response plus environment variables that
//! echo what [`wdp_guest_sdk::current_claim`] returned:
//! `WDP_CLAIM` = `<namespace>/<name>/<uid>` (or `none` outside a DRA
//! prepare), `WDP_CLAIM_REQUESTS` = the requests joined by `,`, and
//! `WDP_CLAIM_CONFIG_<n>` = the n-th opaque configuration's parameters
//! (JSON text), `WDP_CLAIM_CONFIGS` = how many there are; and what
//! [`wdp_guest_sdk::claim_devices`] returned: `WDP_CLAIM_DEVICES` = how
//! many (always set, `0` outside a prepare) and `WDP_CLAIM_DEVICE_<n>` =
//! `<id> device=<device-id> request=<request> partition=<bool>
//! admin=<bool> consumed=<name>=<amount>;... share=<share-id or ->`.
//!
//! `pre-start` fails with `refused by the claim's configuration` when any
//! of the claim's configurations contains the text `"refuse-pre-start"`,
//! so tests can fail one claim of a prepare call on purpose.

use wdp_guest_sdk::{
    Allocate, ClaimDevice, ContainerResponse, DeviceRef, PreStart, claim_devices, current_claim,
};

struct ClaimEcho;

impl Allocate for ClaimEcho {
    fn allocate(
        _devices: Vec<DeviceRef>,
        mut default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        match current_claim() {
            None => default
                .envs
                .push(("WDP_CLAIM".to_string(), "none".to_string())),
            Some(claim) => {
                default.envs.push((
                    "WDP_CLAIM".to_string(),
                    format!("{}/{}/{}", claim.namespace, claim.name, claim.uid),
                ));
                default
                    .envs
                    .push(("WDP_CLAIM_REQUESTS".to_string(), claim.requests.join(",")));
                default.envs.push((
                    "WDP_CLAIM_CONFIGS".to_string(),
                    claim.configs.len().to_string(),
                ));
                for (index, parameters) in claim.configs.into_iter().enumerate() {
                    default
                        .envs
                        .push((format!("WDP_CLAIM_CONFIG_{index}"), parameters));
                }
            }
        }
        let devices = claim_devices();
        default
            .envs
            .push(("WDP_CLAIM_DEVICES".to_string(), devices.len().to_string()));
        for (index, device) in devices.iter().enumerate() {
            default
                .envs
                .push((format!("WDP_CLAIM_DEVICE_{index}"), describe(device)));
        }
        Ok(default)
    }
}

/// One claim device on one line.
fn describe(device: &ClaimDevice) -> String {
    let consumed: Vec<String> = device
        .consumed_capacity
        .iter()
        .map(|(name, amount)| format!("{name}={amount}"))
        .collect();
    format!(
        "{} device={} request={} partition={} admin={} consumed={} share={}",
        device.id,
        device.device_id,
        device.request,
        device.partition,
        device.admin_access,
        consumed.join(";"),
        device.share_id.as_deref().unwrap_or("-"),
    )
}

impl PreStart for ClaimEcho {
    fn pre_start(_devices: Vec<DeviceRef>) -> Result<(), String> {
        let refused = current_claim().is_some_and(|claim| {
            claim
                .configs
                .iter()
                .any(|parameters| parameters.contains("\"refuse-pre-start\""))
        });
        if refused {
            return Err("refused by the claim's configuration".to_string());
        }
        Ok(())
    }
}

wdp_guest_sdk::export_allocate!(ClaimEcho);
wdp_guest_sdk::export_pre_start!(ClaimEcho);
