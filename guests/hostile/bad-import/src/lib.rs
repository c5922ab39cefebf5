//! `hostile-bad-import`: imports `hardware.reset-device`, which the host
//! does not provide: refused at load, naming the import.

wit_bindgen::generate!({
    path: "wit",
    world: "bad-import",
    generate_all,
});

use exports::wasm_device_plugin::policy::pre_start;
use wasm_device_plugin::policy::hardware;

struct BadImport;

impl pre_start::Guest for BadImport {
    fn pre_start(devices: Vec<pre_start::DeviceRef>) -> Result<(), String> {
        for device in devices {
            hardware::reset_device(&device.device_id)?;
        }
        Ok(())
    }
}

export!(BadImport);
