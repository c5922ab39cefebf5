//! `compat-newer-patch`: a health guest built against
//! `wasm-device-plugin:policy@0.1.3`, a patch newer than the host's; a
//! 0.1.2 host loads it (semver).
//! Every device is healthy, with the config value `note` as the reason.

wit_bindgen::generate!({
    path: "wit",
    world: "health-guest",
    generate_all,
});

use exports::wasm_device_plugin::policy::health;
use wasm_device_plugin::policy::host;

struct NewerPatch;

impl health::Guest for NewerPatch {
    fn check(devices: Vec<health::DeviceFacts>) -> Result<Vec<health::Verdict>, String> {
        let note = host::config()
            .into_iter()
            .find(|(key, _)| key == "note")
            .map(|(_, value)| value)
            .unwrap_or_else(|| "0.1.3".to_string());
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

export!(NewerPatch);
