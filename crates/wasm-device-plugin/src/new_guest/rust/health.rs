
use exports::wasm_device_plugin::policy::health;

/// `health`: a device is healthy while every one of its candidates is present.
impl health::Guest for Policy {
    fn check(devices: Vec<health::DeviceFacts>) -> Result<Vec<health::Verdict>, String> {
        Ok(devices
            .into_iter()
            .map(|facts| {
                let missing: Vec<&str> = facts
                    .device
                    .candidates
                    .iter()
                    .filter(|id| !facts.candidates.iter().any(|c| &c.id == *id && c.present))
                    .map(String::as_str)
                    .collect();
                if missing.is_empty() {
                    health::Verdict {
                        id: facts.device.id,
                        healthy: true,
                        reason: "every candidate is present".to_string(),
                    }
                } else {
                    let reason = format!("not present: {}", missing.join(", "));
                    log(
                        wasm_device_plugin::policy::host::LogLevel::Warn,
                        &format!("{}: {reason}", facts.device.id),
                    );
                    health::Verdict {
                        id: facts.device.id,
                        healthy: false,
                        reason,
                    }
                }
            })
            .collect())
    }
}
