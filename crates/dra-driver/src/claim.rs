//! A claim as the kubelet names it ([`ClaimRef`]), and how its device
//! statuses reach the API server ([`StatusWrite`] through a
//! [`StatusWriter`], the API server's in production, none in tests that do
//! not look).

use std::sync::Arc;

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

/// Writes device statuses into claims (the API server in production).
pub type StatusWriter = Arc<
    dyn Fn(StatusWrite) -> std::pin::Pin<Box<dyn Future<Output = Result<(), String>> + Send>>
        + Send
        + Sync,
>;

/// A [`StatusWriter`] in a struct that derives `Debug`.
#[derive(Clone)]
pub(crate) struct StatusWriterSlot(pub(crate) StatusWriter);

impl std::fmt::Debug for StatusWriterSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatusWriter")
    }
}
