//! Counters of what clients did over HTTP, for tests that check a client's behaviour
//! (how many writes a publisher made, which were rejected and why).

/// Requests seen, and ResourceSlice and ResourceClaim status writes accepted or rejected over HTTP (test-side calls such
/// as [`crate::FakeApiServer::wipe_node_slices`] are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every HTTP request received, refused ones included.
    pub requests_total: u64,
    /// Accepted ResourceSlice creates (POST).
    pub slice_creates: u64,
    /// Accepted ResourceSlice updates (PUT and PATCH), no-op updates included.
    pub slice_updates: u64,
    /// ResourceSlices deleted by single DELETE requests.
    pub slice_deletes: u64,
    /// Accepted DeleteCollection requests on ResourceSlices.
    pub slice_collection_deletes: u64,
    /// ResourceSlice writes answered with an error, in order.
    pub rejected: Vec<RejectedWrite>,
    /// Accepted ResourceClaim status writes (PUT and PATCH of `.../status`), no-op writes
    /// included.
    pub claim_status_writes: u64,
    /// ResourceClaim status writes answered with an error, in order (`name` is
    /// `namespace/name`).
    pub claim_status_rejected: Vec<RejectedWrite>,
}

/// A write the server refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedWrite {
    /// `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: &'static str,
    /// The object's name as far as the request named it ("" when it did not).
    pub name: String,
    /// The HTTP status code.
    pub code: u16,
    /// The Status `reason`, e.g. `Invalid`, `Conflict`.
    pub reason: String,
    /// The Status `message`.
    pub message: String,
}
