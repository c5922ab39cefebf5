//! `claim-echo`: a test guest for the `claim` import (WIT 0.1.1).
//!
//! `allocate` returns the default response plus environment variables that
//! echo what [`wdp_guest_sdk::current_claim`] returned:
//! `WDP_CLAIM` = `<namespace>/<name>/<uid>` (or `none` outside a DRA
//! prepare), `WDP_CLAIM_REQUESTS` = the requests joined by `,`, and
//! `WDP_CLAIM_CONFIG_<n>` = the n-th opaque configuration's parameters
//! (JSON text), `WDP_CLAIM_CONFIGS` = how many there are.
//!
//! `pre-start` fails with `refused by the claim's configuration` when any
//! of the claim's configurations contains the text `"refuse-pre-start"`,
//! so tests can fail one claim of a prepare call on purpose.

use wdp_guest_sdk::{Allocate, ContainerResponse, DeviceRef, PreStart, current_claim};

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
        Ok(default)
    }
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
