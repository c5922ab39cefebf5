//! `compat-taints-both`: a guest that exports both `device-taints` (WIT
//! 0.1.2) and `device-taints-v2` (WIT 0.1.3), as a guest moving to the new
//! interface while keeping the old one for older hosts might. A 0.1.3 host
//! asks only `device-taints-v2`.
//!
//! `device-taints`: every device gets `asked=device-taints` (NoSchedule).
//! `device-taints-v2`: every device gets `asked=device-taints-v2` with
//! effect `none`.

use wdp_guest_sdk::{
    DeviceFacts, DeviceTaint, DeviceTaintV2, DeviceTaints, DeviceTaintsV2, TaintEffect,
    TaintEffectV2, Tainted, TaintedV2,
};

struct Both;

impl DeviceTaints for Both {
    fn taints(devices: Vec<DeviceFacts>) -> Result<Vec<Tainted>, String> {
        Ok(devices
            .into_iter()
            .map(|facts| Tainted {
                id: facts.device.id,
                taints: vec![DeviceTaint::new(
                    "asked",
                    "device-taints",
                    TaintEffect::NoSchedule,
                )],
            })
            .collect())
    }
}

impl DeviceTaintsV2 for Both {
    fn taints(devices: Vec<DeviceFacts>) -> Result<Vec<TaintedV2>, String> {
        Ok(devices
            .into_iter()
            .map(|facts| TaintedV2 {
                id: facts.device.id,
                taints: vec![DeviceTaintV2::new(
                    "asked",
                    "device-taints-v2",
                    TaintEffectV2::None,
                )],
            })
            .collect())
    }
}

wdp_guest_sdk::export_device_taints!(Both);
wdp_guest_sdk::export_device_taints_v2!(Both);
