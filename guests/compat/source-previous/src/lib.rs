//! `compat-source-previous`: one guest source, written against the
//! `all-hooks` world of the previous WIT release
//! (`wasm-device-plugin:policy@0.1.1`, `../previous-patch/wit`), that must
//! compile unchanged against the current WIT (`wit/`, feature
//! `current-wit`): the evolution rule that a published world's exports
//! never change, checked by building it both ways in CI.
//!
//! Each hook gives the answer that changes nothing: discovery advertises
//! nothing of its own, health keeps the built-in verdicts, preferred
//! allocation takes the first devices, allocate answers the default.

#[cfg(not(feature = "current-wit"))]
wit_bindgen::generate!({
    path: "../previous-patch/wit",
    world: "all-hooks",
    generate_all,
});

#[cfg(feature = "current-wit")]
wit_bindgen::generate!({
    path: "../../../wit",
    world: "all-hooks",
    generate_all,
});

use exports::wasm_device_plugin::policy::{
    allocate, discovery, health, pre_start, preferred_allocation,
};

struct SourcePrevious;

impl discovery::Guest for SourcePrevious {
    fn discover(_candidates: Vec<discovery::Candidate>) -> Result<Vec<discovery::Device>, String> {
        Ok(Vec::new())
    }
}

impl health::Guest for SourcePrevious {
    fn check(_devices: Vec<health::DeviceFacts>) -> Result<Vec<health::Verdict>, String> {
        Ok(Vec::new())
    }
}

impl preferred_allocation::Guest for SourcePrevious {
    fn choose(request: preferred_allocation::Request) -> Result<Vec<String>, String> {
        let mut chosen = request.must_include;
        for device in request.available {
            if chosen.len() >= request.size as usize {
                break;
            }
            if !chosen.contains(&device.id) {
                chosen.push(device.id);
            }
        }
        Ok(chosen)
    }
}

impl allocate::Guest for SourcePrevious {
    fn allocate(
        _devices: Vec<allocate::DeviceRef>,
        default: allocate::ContainerResponse,
    ) -> Result<allocate::ContainerResponse, String> {
        Ok(default)
    }
}

impl pre_start::Guest for SourcePrevious {
    fn pre_start(_devices: Vec<pre_start::DeviceRef>) -> Result<(), String> {
        Ok(())
    }
}

export!(SourcePrevious);
