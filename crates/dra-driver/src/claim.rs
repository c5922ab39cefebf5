//! A claim as the kubelet names it ([`ClaimRef`]), and one write of its
//! device statuses ([`StatusWrite`], handed to the API server through
//! [`crate::ApiPort::write_status`]).

use k8s_openapi::api::resource::v1::AllocatedDeviceStatus;

/// A claim as the kubelet names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
}

impl std::fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

/// One write of a claim's device statuses: this driver's and pool's
/// entries of `status.devices` become `statuses` (none: removed).
#[derive(Clone, Debug)]
pub struct StatusWrite {
    /// The claim.
    pub claim: ClaimRef,
    /// The driver whose entries are replaced.
    pub driver: String,
    /// The pool whose entries are replaced.
    pub pool: String,
    /// The new entries.
    pub statuses: Vec<AllocatedDeviceStatus>,
}
