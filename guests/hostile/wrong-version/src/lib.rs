//! `hostile-wrong-version`: a health guest built against
//! `wasm-device-plugin:policy@0.2.0`: refused at load by a 0.1 host.

wit_bindgen::generate!({
    path: "wit",
    world: "health-guest",
    generate_all,
});

use exports::wasm_device_plugin::policy::health;

struct WrongVersion;

impl health::Guest for WrongVersion {
    fn check(_: Vec<health::DeviceFacts>) -> Result<Vec<health::Verdict>, String> {
        Ok(Vec::new())
    }
}

export!(WrongVersion);
