//! What a guest may reach of the hardware during one call: the resource's
//! candidates, attribute reads scoped beneath them, and the writes its
//! config grants. Backs the `hardware` imports of the WIT package.

use std::sync::Arc;

use wdp_hardware::{Candidate, HostRoot};
use wdp_policy::{HostServices, types as guest};

use crate::convert::guest_candidate;

/// The hardware facts one guest call may see.
pub(crate) struct ResourceServices {
    root: HostRoot,
    candidates: Arc<Vec<Candidate>>,
    writable: Vec<String>,
}

impl ResourceServices {
    /// Access to `candidates` under `root`, with `writable` attributes
    /// granted for writes.
    pub fn new(root: HostRoot, candidates: Arc<Vec<Candidate>>, writable: Vec<String>) -> Self {
        Self {
            root,
            candidates,
            writable,
        }
    }

    fn find(&self, id: &str) -> Result<&Candidate, String> {
        self.candidates
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("candidate {id:?} is not selected by this resource"))
    }
}

impl HostServices for ResourceServices {
    fn candidates(&self) -> Vec<guest::Candidate> {
        self.candidates
            .iter()
            .map(|c| guest_candidate(c, is_present(&self.root, c)))
            .collect()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        let candidate = self.find(candidate_id)?;
        wdp_hardware::read_attribute(&self.root, candidate, name).map_err(|e| e.to_string())
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String> {
        let candidate = self.find(candidate_id)?;
        wdp_hardware::write_attribute(&self.root, candidate, name, value, &self.writable)
            .map_err(|e| e.to_string())
    }
}

/// Whether a candidate's hardware is there right now.
pub(crate) fn is_present(root: &HostRoot, candidate: &Candidate) -> bool {
    match &candidate.sysfs_dir {
        Some(dir) => root.resolve(dir).exists(),
        None => candidate
            .nodes
            .iter()
            .all(|n| root.resolve(&n.path).exists()),
    }
}
