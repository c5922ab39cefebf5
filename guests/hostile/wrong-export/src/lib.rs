//! `hostile-wrong-export`: exports the `pre-start` hook and, besides it,
//! `wdp-test:extra/telemetry@0.1.0`, which is no hook: refused at load.

wit_bindgen::generate!({
    path: ["../../../wit", "wit"],
    world: "wdp-test:extra/wrong-export",
    generate_all,
});

use exports::wasm_device_plugin::policy::pre_start;
use exports::wdp_test::extra::telemetry;

struct WrongExport;

impl pre_start::Guest for WrongExport {
    fn pre_start(_: Vec<pre_start::DeviceRef>) -> Result<(), String> {
        Ok(())
    }
}

impl telemetry::Guest for WrongExport {
    fn ping() -> u32 {
        42
    }
}

export!(WrongExport);
