
use exports::wasm_device_plugin::policy::pre_start;

/// `pre-start`: refuses to start a container with a device that has no
/// device node; an `Err` fails the start with its message.
impl pre_start::Guest for Policy {
    fn pre_start(devices: Vec<pre_start::DeviceRef>) -> Result<(), String> {
        if let Some(device) = devices.iter().find(|device| device.nodes.is_empty()) {
            return Err(format!("device {} has no device node", device.id));
        }
        log(
            wasm_device_plugin::policy::host::LogLevel::Info,
            &format!("pre-start: {} device(s) ready", devices.len()),
        );
        Ok(())
    }
}
