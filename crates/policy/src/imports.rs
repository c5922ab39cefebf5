//! The host imports guests call: `host` (logging, config), `hardware`
//! (served by the call's [`crate::HostServices`]) and `claim` (the call's
//! [`crate::ClaimInfo`]), implemented on a call's [`CallState`].

use crate::bindings::wasm_device_plugin::policy::{claim as wit_claim, hardware, host};
use crate::call_state::CallState;
use crate::claim::ClaimInfo;
use crate::types::{Candidate, ClaimDevice};

/// The longest log line a guest may write; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;
/// How many log lines one call may write; further lines are dropped.
const MAX_LOG_LINES: u32 = 256;

impl host::Host for CallState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(
                    guest = %self.info.guest,
                    hook = self.hook_name(),
                    resource = %self.info.resource,
                    "guest log line limit ({MAX_LOG_LINES} per call) reached; dropping further lines"
                );
            }
            return;
        }
        let message = truncate(&message, MAX_LOG_LINE);
        let guest = &*self.info.guest;
        let hook = self.hook_name();
        let resource = self.info.resource.as_str();
        match level {
            host::LogLevel::Trace => tracing::trace!(guest, hook, resource, "{message}"),
            host::LogLevel::Debug => tracing::debug!(guest, hook, resource, "{message}"),
            host::LogLevel::Info => tracing::info!(guest, hook, resource, "{message}"),
            host::LogLevel::Warn => tracing::warn!(guest, hook, resource, "{message}"),
            host::LogLevel::Error => tracing::error!(guest, hook, resource, "{message}"),
        }
    }

    fn config(&mut self) -> Vec<(String, String)> {
        (*self.info.config).clone()
    }
}

impl hardware::Host for CallState {
    fn candidates(&mut self) -> Vec<Candidate> {
        self.info.services.candidates()
    }

    fn read_attribute(&mut self, candidate_id: String, name: String) -> Result<String, String> {
        self.info.services.read_attribute(&candidate_id, &name)
    }

    fn write_attribute(
        &mut self,
        candidate_id: String,
        name: String,
        value: String,
    ) -> Result<(), String> {
        self.info
            .services
            .write_attribute(&candidate_id, &name, &value)
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl From<&ClaimInfo> for wit_claim::ClaimInfo {
    fn from(info: &ClaimInfo) -> Self {
        Self {
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            uid: info.uid.clone(),
            requests: info.requests.clone(),
            configs: info.configs.clone(),
        }
    }
}

impl wit_claim::Host for CallState {
    fn current(&mut self) -> Option<wit_claim::ClaimInfo> {
        self.claim().map(wit_claim::ClaimInfo::from)
    }

    fn devices(&mut self) -> Vec<ClaimDevice> {
        self.claim()
            .map(|claim| claim.devices.clone())
            .unwrap_or_default()
    }
}
