//! How a DRA driver reaches the Kubernetes API server: one port,
//! [`ApiPort`], with one error type, [`ApiPortError`]. A driver reads the
//! claims the kubelet names, writes their device statuses and starts the
//! publishers of its ResourceSlices through it, and through nothing else.
//!
//! The host implements it over `wdp-dra-client` (one client, made when the
//! first DRA resource is served); tests implement it with doubles that
//! answer from memory. Its futures are boxed (`BoxFuture`), so the port is
//! used as `Arc<dyn ApiPort>`.

use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{ApiError, ClaimEvent, PoolTarget, PublisherHandle, WriteFence};

use crate::claim::{ClaimRef, StatusWrite};

/// Why the API server did not do what a DRA driver asked.
#[derive(Debug, thiserror::Error)]
pub enum ApiPortError {
    /// The API server refused, failed or could not be reached.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The API server did not answer in time.
    #[error("{what}: no answer within {after:?}")]
    NoAnswer {
        /// What was asked, naming the object.
        what: String,
        /// How long the driver waited.
        after: Duration,
    },
}

/// What a DRA driver needs of the API server.
pub trait ApiPort: Send + Sync + std::fmt::Debug {
    /// Reads `claim`: `Ok(None)` when the API server has no claim of that
    /// namespace and name (whatever its UID).
    fn read_claim(
        &self,
        claim: &ClaimRef,
    ) -> BoxFuture<'static, Result<Option<ResourceClaim>, ApiPortError>>;

    /// Writes a claim's device statuses: this driver's and pool's entries
    /// of its `status.devices` become `write.statuses` (none: removed).
    fn write_status(&self, write: StatusWrite) -> BoxFuture<'static, Result<(), ApiPortError>>;

    /// Follows every ResourceClaim of the cluster (a resource that binds
    /// devices on demand: see `passthrough`); the stream retries on its
    /// own and ends only when dropped.
    fn watch_claims(&self) -> BoxStream<'static, ClaimEvent>;

    /// Starts the publisher of pool `target`, writing only while `fence`
    /// allows and stopping with `shutdown`.
    fn spawn_publisher(
        &self,
        target: PoolTarget,
        fence: WriteFence,
        shutdown: &CancellationToken,
    ) -> PublisherHandle;
}

#[cfg(test)]
#[path = "api_port_tests.rs"]
mod tests;
