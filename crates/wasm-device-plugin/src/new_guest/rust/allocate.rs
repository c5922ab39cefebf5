
use exports::wasm_device_plugin::policy::allocate;

/// `allocate`: the built-in answer (one device spec per device node), plus
/// `EXAMPLE_VISIBLE_DEVICES` listing the container's device IDs.
impl allocate::Guest for Policy {
    fn allocate(
        devices: Vec<allocate::DeviceRef>,
        mut default: allocate::ContainerResponse,
    ) -> Result<allocate::ContainerResponse, String> {
        let ids: Vec<&str> = devices.iter().map(|device| device.id.as_str()).collect();
        default
            .envs
            .push(("EXAMPLE_VISIBLE_DEVICES".to_string(), ids.join(",")));
        Ok(default)
    }
}
