//! `hostile-feedback-writer`: a health hook that, on every call, writes the
//! attribute named by `[guest-config] attribute` (default `power_state`) of
//! each candidate it judges, then calls the device healthy.
//!
//! A legitimate policy may do the same (reset a counter, set a power
//! state); the host must not take the write's own inotify echo for a
//! hardware change, or health would call itself in a loop.

use wdp_guest_sdk::{DeviceFacts, Health, Verdict, hardware};

struct FeedbackWriter;

impl Health for FeedbackWriter {
    fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
        let config = wdp_guest_sdk::config();
        let attribute = config.get_or("attribute", "power_state");
        let mut verdicts = Vec::new();
        for facts in devices {
            for candidate in &facts.candidates {
                hardware::write_attribute(&candidate.id, attribute, "D0")?;
            }
            verdicts.push(Verdict::healthy(facts.device.id, "written"));
        }
        Ok(verdicts)
    }
}

wdp_guest_sdk::export_health!(FeedbackWriter);
