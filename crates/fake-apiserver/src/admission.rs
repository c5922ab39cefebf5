//! What a write's admission step knows about the server's configuration, shared by the store
//! (which builds it once per write) and the kinds' admission steps (which read it).

use k8s_openapi::jiff::Timestamp;

/// What the admission step needs to know about the server's configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AdmissionPolicy {
    /// `spec.devices[].taints` are dropped (DRADeviceTaints off, 1.34–1.36 servers).
    pub(crate) taints_dropped: bool,
    /// The time the server stamps on new taints.
    pub(crate) now: Timestamp,
}
