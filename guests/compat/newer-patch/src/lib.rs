//! `compat-newer-patch`: a health and device-taints guest built against
//! `wasm-device-plugin:policy@0.1.4`, a patch newer than the host's; a
//! 0.1.3 host loads it (semver).
//!
//! `health`: every device is healthy, with the config value `note` as the
//! reason. `device-taints` (a 0.1.2 hook, exported beside `health`, whose
//! `device-facts` it shares): every device gets one taint
//! `example.com/note=<note>` with effect `NoExecute`.

wit_bindgen::generate!({
    inline: "
        package wdp-test:newer-patch;
        world health-and-taints {
            include wasm-device-plugin:policy/health-guest@0.1.4;
            export wasm-device-plugin:policy/device-taints@0.1.4;
        }
    ",
    path: "wit",
    world: "wdp-test:newer-patch/health-and-taints",
    generate_all,
});

use exports::wasm_device_plugin::policy::{device_taints, health};
use wasm_device_plugin::policy::host;
use wasm_device_plugin::policy::types::{DeviceTaint, TaintEffect};

struct NewerPatch;

fn note() -> String {
    host::config()
        .into_iter()
        .find(|(key, _)| key == "note")
        .map(|(_, value)| value)
        .unwrap_or_else(|| "0.1.4".to_string())
}

impl health::Guest for NewerPatch {
    fn check(devices: Vec<health::DeviceFacts>) -> Result<Vec<health::Verdict>, String> {
        let note = note();
        Ok(devices
            .into_iter()
            .map(|facts| health::Verdict {
                id: facts.device.id,
                healthy: true,
                reason: note.clone(),
            })
            .collect())
    }
}

impl device_taints::Guest for NewerPatch {
    fn taints(
        devices: Vec<device_taints::DeviceFacts>,
    ) -> Result<Vec<device_taints::Tainted>, String> {
        let note = note();
        Ok(devices
            .into_iter()
            .map(|facts| device_taints::Tainted {
                id: facts.device.id,
                taints: vec![DeviceTaint {
                    key: "example.com/note".to_string(),
                    value: note.clone(),
                    effect: TaintEffect::NoExecute,
                }],
            })
            .collect())
    }
}

export!(NewerPatch);
