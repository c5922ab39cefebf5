//! `compat-previous-patch`: an allocate guest built against
//! `wasm-device-plugin:policy@0.1.1`, whose `claim` import has `current`
//! but not `devices` (added in 0.1.2); a 0.1.2 host keeps loading it and
//! serving its `claim` import unchanged (semver).
//!
//! `allocate` returns the default response plus `WDP_CLAIM` =
//! `<namespace>/<name>` of the claim being prepared, or `none`.

wit_bindgen::generate!({
    path: "wit",
    world: "allocate-guest",
    generate_all,
});

use exports::wasm_device_plugin::policy::allocate;
use wasm_device_plugin::policy::claim;

struct PreviousPatch;

impl allocate::Guest for PreviousPatch {
    fn allocate(
        _devices: Vec<allocate::DeviceRef>,
        mut default: allocate::ContainerResponse,
    ) -> Result<allocate::ContainerResponse, String> {
        let value = match claim::current() {
            Some(info) => format!("{}/{}", info.namespace, info.name),
            None => "none".to_string(),
        };
        default.envs.push(("WDP_CLAIM".to_string(), value));
        Ok(default)
    }
}

export!(PreviousPatch);
