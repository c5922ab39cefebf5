//! What the host serves a guest's `hardware` imports from: the
//! [`HostServices`] a caller hands each call, and [`NoHardware`], the
//! services of a host without any.

use crate::types::Candidate;

/// What the host gives a guest during one call; the `hardware` imports
/// delegate here.
pub trait HostServices: Send + Sync {
    /// `hardware.candidates`: the candidates the resource's selectors
    /// matched, freshly read.
    fn candidates(&self) -> Vec<Candidate>;
    /// `hardware.read-attribute`: a sysfs attribute beneath a candidate.
    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String>;
    /// `hardware.write-attribute`: refused unless granted by config.
    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String>;
}

/// [`HostServices`] with no hardware at all: no candidates, every read and
/// write refused. Handy for smoke tests and `check` runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHardware;

impl HostServices for NoHardware {
    fn candidates(&self) -> Vec<Candidate> {
        Vec::new()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        Err(format!("no hardware: cannot read {name} of {candidate_id}"))
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, _value: &str) -> Result<(), String> {
        Err(format!(
            "no hardware: cannot write {name} of {candidate_id}"
        ))
    }
}
