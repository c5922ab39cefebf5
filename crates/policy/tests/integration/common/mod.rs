//! Shared fixtures of the policy tests.

#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use wdp_policy::{
    CallContext, CallLimits, Candidate, CandidateKind, DeviceNode, DeviceRef, EngineSettings,
    Guest, HostServices, NodeType, PolicyEngine,
};

/// One engine per test binary (each reserves its instance pool).
pub fn engine() -> &'static PolicyEngine {
    static ENGINE: OnceLock<PolicyEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        PolicyEngine::new(EngineSettings {
            max_instances: 64,
            ..EngineSettings::default()
        })
        .expect("engine")
    })
}

pub fn load(path: &str) -> Arc<Guest> {
    engine()
        .load_file(std::path::Path::new(path))
        .unwrap_or_else(|e| panic!("{e}"))
}

pub fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Hardware served from memory; counts attribute reads.
#[derive(Default)]
pub struct FakeHardware {
    pub candidates: Mutex<Vec<Candidate>>,
    pub attributes: BTreeMap<(String, String), String>,
    pub reads: AtomicUsize,
}

impl HostServices for FakeHardware {
    fn candidates(&self) -> Vec<Candidate> {
        self.candidates.lock().unwrap().clone()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.attributes
            .get(&(candidate_id.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| format!("{candidate_id} has no attribute {name}"))
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, _: &str) -> Result<(), String> {
        Err(format!("writing {name} of {candidate_id} is not granted"))
    }
}

pub fn ctx_with(
    hardware: Arc<FakeHardware>,
    config: &[(&str, &str)],
    limits: CallLimits,
) -> CallContext {
    CallContext {
        limits,
        services: hardware,
        config: Arc::new(pairs(config)),
        resource: "example.com/gpu".to_string(),
        generation: None,
        claim: None,
    }
}

pub fn ctx(config: &[(&str, &str)]) -> CallContext {
    ctx_with(Arc::default(), config, CallLimits::default())
}

pub fn limits(timeout_ms: u64, memory_mib: u64) -> CallLimits {
    CallLimits {
        timeout: Duration::from_millis(timeout_ms),
        memory_bytes: memory_mib * 1024 * 1024,
    }
}

pub fn node(path: &str, minor: u32) -> DeviceNode {
    DeviceNode {
        path: path.to_string(),
        node_type: NodeType::Char,
        major: 195,
        minor,
    }
}

pub fn pci(id: &str, vendor: &str, class: &str, driver: Option<&str>, numa: i64) -> Candidate {
    let mut attributes = pairs(&[
        ("pci.address", id),
        ("pci.vendor", vendor),
        ("pci.class", class),
    ]);
    if let Some(driver) = driver {
        attributes.push(("pci.driver".into(), driver.into()));
    }
    Candidate {
        id: id.to_string(),
        kind: CandidateKind::Pci,
        present: true,
        numa_nodes: vec![numa],
        attributes,
        nodes: Vec::new(),
    }
}

pub fn device_ref(id: &str, numa: i64, attributes: &[(&str, &str)]) -> DeviceRef {
    DeviceRef {
        id: id.to_string(),
        device_id: id.split("::").next().unwrap_or(id).to_string(),
        numa_nodes: vec![numa],
        attributes: pairs(attributes),
        nodes: vec![node(&format!("/dev/{}", id.replace("::", "-")), 0)],
    }
}
