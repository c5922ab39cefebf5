//! The claim a call serves (WIT 0.1.1, devices since 0.1.2): which Dynamic
//! Resource Allocation claim, the claim's opaque configuration for the
//! driver and the claim's devices of the driver, as the `claim` import
//! returns them (served in [`crate::imports`]).
//!
//! The caller sets [`crate::CallContext::claim`] for the `dra-prepare`,
//! `allocate` and `pre-start` calls of a DRA prepare (and the
//! `dra-unprepare` call that undoes it); everywhere else it is `None`: the
//! guest's `claim.current()` returns `none` and `claim.devices()` an empty
//! list. Guests built against 0.1.0 do not import this interface, guests
//! built against 0.1.1 import it without `devices`; both load unchanged.

use std::sync::Arc;

use crate::types::ClaimDevice;

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
    /// The claim's devices of this driver, in allocation order, with the
    /// request each serves, admin access and consumed capacity: what
    /// `claim.devices()` returns (WIT 0.1.2).
    pub devices: Vec<ClaimDevice>,
}

/// The claim of a call, shared between the context and the store.
pub(crate) type SharedClaim = Option<Arc<ClaimInfo>>;
