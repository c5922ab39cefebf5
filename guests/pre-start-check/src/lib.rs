//! `pre-start-check`: a pre-start guest.
//!
//! Refuses the container start, with a message, when the hardware of any
//! of its devices is not present any more (checked against a fresh
//! `hardware.candidates()`), or when the config key `require-attribute`
//! names an attribute a device lacks. With `log-attribute` set it also reads
//! that sysfs attribute of each present candidate through
//! `hardware.read-attribute` and logs it.
//!
//! ```toml
//! [guest-config]
//! require-attribute = "pci.driver"
//! log-attribute = "current_link_speed"
//! ```

use wdp_guest_sdk::{DeviceRef, PreStart, hardware};

struct PreStartCheck;

impl PreStart for PreStartCheck {
    fn pre_start(devices: Vec<DeviceRef>) -> Result<(), String> {
        let config = wdp_guest_sdk::config();
        let required = config
            .get("require-attribute")
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let log_attribute = config
            .get("log-attribute")
            .map(str::trim)
            .filter(|a| !a.is_empty());
        let candidates = hardware::candidates();

        let mut problems = Vec::new();
        for device in &devices {
            if let Some(name) = required
                && device.attr(name).is_none()
            {
                problems.push(format!("device {} lacks attribute {name}", device.id));
            }
            // The candidates of a device share its ID (discovery guests in
            // this repository) or are named by its attributes; check the ID
            // first, then every candidate whose nodes the device carries.
            let own: Vec<_> = candidates
                .iter()
                .filter(|c| {
                    c.id == device.device_id
                        || c.nodes
                            .iter()
                            .any(|n| device.nodes.iter().any(|d| d.path == n.path))
                })
                .collect();
            if own.is_empty() {
                problems.push(format!("device {}: no hardware found", device.id));
            }
            for candidate in own {
                if !candidate.present {
                    problems.push(format!(
                        "device {}: candidate {} is not present",
                        device.id, candidate.id
                    ));
                } else if let Some(name) = log_attribute {
                    match hardware::read_attribute(&candidate.id, name) {
                        Ok(value) => wdp_guest_sdk::info!(
                            "device {} candidate {}: {name} = {}",
                            device.id,
                            candidate.id,
                            value.trim()
                        ),
                        Err(error) => wdp_guest_sdk::warn!(
                            "device {} candidate {}: cannot read {name}: {error}",
                            device.id,
                            candidate.id
                        ),
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

wdp_guest_sdk::export_pre_start!(PreStartCheck);
