//! `compat-taints-0-1-2`: a `device-taints` guest built against
//! `wasm-device-plugin:policy@0.1.2` (its `wit/policy.wit` is that
//! release's file, kept as published), the release before
//! `device-taints-v2`: a 0.1.3 host loads it and asks its `device-taints`
//! as before.
//!
//! Every device gets the taint `legacy=<note>` (the config value `note`,
//! default `0.1.2`) with effect `NoSchedule`.

wit_bindgen::generate!({
    path: "wit",
    world: "wasm-device-plugin:policy/device-taints-guest@0.1.2",
    generate_all,
});

use exports::wasm_device_plugin::policy::device_taints;
use wasm_device_plugin::policy::host;
use wasm_device_plugin::policy::types::{DeviceTaint, TaintEffect};

struct Taints012;

impl device_taints::Guest for Taints012 {
    fn taints(
        devices: Vec<device_taints::DeviceFacts>,
    ) -> Result<Vec<device_taints::Tainted>, String> {
        let note = host::config()
            .into_iter()
            .find(|(key, _)| key == "note")
            .map_or_else(|| "0.1.2".to_string(), |(_, value)| value);
        Ok(devices
            .into_iter()
            .map(|facts| device_taints::Tainted {
                id: facts.device.id,
                taints: vec![DeviceTaint {
                    key: "legacy".to_string(),
                    value: note.clone(),
                    effect: TaintEffect::NoSchedule,
                }],
            })
            .collect())
    }
}

export!(Taints012);
