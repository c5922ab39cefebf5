
use exports::wasm_device_plugin::policy::preferred_allocation;

/// `preferred-allocation`: the must-include devices first, then the first
/// available ones, up to the requested size.
impl preferred_allocation::Guest for Policy {
    fn choose(request: preferred_allocation::Request) -> Result<Vec<String>, String> {
        let size = request.size as usize;
        if request.must_include.len() > size {
            return Err(format!(
                "{} must-include devices do not fit an allocation of {size}",
                request.must_include.len()
            ));
        }
        let mut chosen = request.must_include;
        for device in request.available {
            if chosen.len() == size {
                break;
            }
            if !chosen.contains(&device.id) {
                chosen.push(device.id);
            }
        }
        if chosen.len() < size {
            return Err(format!(
                "only {} devices available for an allocation of {size}",
                chosen.len()
            ));
        }
        Ok(chosen)
    }
}
