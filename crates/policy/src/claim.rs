//! The `claim` import (WIT 0.1.1): which Dynamic Resource Allocation claim
//! a call serves and the claim's opaque configuration for the driver.
//!
//! The caller sets [`crate::CallContext::claim`] for the `allocate` and
//! `pre-start` calls of a DRA prepare; everywhere else it is `None` and the
//! guest's `claim.current()` returns `none`. Guests built against 0.1.0 do
//! not import this interface and load unchanged.

use std::sync::Arc;

use wasmtime::component::{HasSelf, Linker};

use crate::bindings::wasm_device_plugin::policy::claim as wit_claim;
use crate::host::CallState;

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
}

/// Adds the `claim` interface to the shared linker.
pub(crate) fn add_to_linker(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    wit_claim::add_to_linker::<CallState, HasSelf<CallState>>(linker, |state| state)
}

/// The claim of a call, shared between the context and the store.
pub(crate) type SharedClaim = Option<Arc<ClaimInfo>>;
