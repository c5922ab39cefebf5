//! The claim a call serves (WIT 0.1.1): which Dynamic Resource Allocation
//! claim and the claim's opaque configuration for the driver, as the
//! `claim` import returns it (served in [`crate::imports`]).
//!
//! The caller sets [`crate::CallContext::claim`] for the `allocate` and
//! `pre-start` calls of a DRA prepare; everywhere else it is `None` and the
//! guest's `claim.current()` returns `none`. Guests built against 0.1.0 do
//! not import this interface and load unchanged.

use std::sync::Arc;

/// A ResourceClaim being prepared, as far as one driver is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimInfo {
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub name: String,
    /// The claim's UID.
    pub uid: String,
    /// The claim's requests this driver's devices serve, in the order of
    /// the allocation results (a request may repeat when it got several
    /// devices; callers usually list each once).
    pub requests: Vec<String>,
    /// The `parameters` (JSON text) of every opaque configuration for this
    /// driver that applies to one of [`Self::requests`], in allocation
    /// order (class configuration first, then the claim's own).
    pub configs: Vec<String>,
}

/// The claim of a call, shared between the context and the store.
pub(crate) type SharedClaim = Option<Arc<ClaimInfo>>;
