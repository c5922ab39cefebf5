//! The DRA side's connection to the Kubernetes API server, through
//! `wdp-dra-client`: made once, when the first DRA resource is served (a
//! host with only device-plugin resources never talks to the API server),
//! from `--kubeconfig` or the in-cluster configuration. It reads claims,
//! writes their device statuses and starts one ResourceSlice publisher per
//! driver.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use wdp_dra_client::{PoolTarget, PublisherHandle, SlicePublisher, WriteFence};

use crate::claim::StatusWriter;
use crate::error::DraError;
use crate::service::ClaimReader;

/// How long a claim read may take: well inside the kubelet's 45 s for a
/// whole `NodePrepareResources` call, so a hung API server fails the claim
/// with a reason instead of the call with a deadline.
pub const CLAIM_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts the slice publisher of one pool, writing only while its fence
/// allows.
pub type PublisherSpawner =
    Arc<dyn Fn(PoolTarget, WriteFence, &CancellationToken) -> PublisherHandle + Send + Sync>;

/// What DRA drivers need of the API server.
#[derive(Clone)]
pub struct DraApi {
    /// Reads ResourceClaims.
    pub read_claim: ClaimReader,
    /// Starts ResourceSlice publishers.
    pub spawn_publisher: PublisherSpawner,
    /// Writes device statuses into claims.
    pub write_status: StatusWriter,
}

impl std::fmt::Debug for DraApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraApi").finish_non_exhaustive()
    }
}

/// Connects to the API server `kubeconfig` names, or the in-cluster one
/// when `None` (no request is made yet: an unreachable server shows in the
/// publishers' status, never here). `file` is the DRA resource that needs
/// it, for the error.
pub async fn connect(
    kubeconfig: Option<&std::path::Path>,
    file: &std::path::Path,
) -> Result<DraApi, DraError> {
    let client =
        wdp_dra_client::client(kubeconfig)
            .await
            .map_err(|source| DraError::NoApiClient {
                file: file.to_owned(),
                source,
            })?;
    let for_claims = client.clone();
    let read_claim: ClaimReader = Arc::new(move |claim| {
        let client = for_claims.clone();
        Box::pin(async move {
            let read = wdp_dra_client::get_claim(&client, &claim.namespace, &claim.name);
            match tokio::time::timeout(CLAIM_READ_TIMEOUT, read).await {
                Ok(answer) => answer.map_err(|error| error.to_string()),
                Err(_) => Err(format!(
                    "reading ResourceClaim {}/{}: no answer within {CLAIM_READ_TIMEOUT:?}",
                    claim.namespace, claim.name
                )),
            }
        })
    });
    let for_status = client.clone();
    let write_status: StatusWriter = Arc::new(move |write| {
        let client = for_status.clone();
        Box::pin(async move {
            let claim = &write.claim;
            let written = wdp_dra_client::write_device_status(
                &client,
                &claim.namespace,
                &claim.name,
                &claim.uid,
                &write.driver,
                &write.pool,
                write.statuses,
            );
            match tokio::time::timeout(CLAIM_READ_TIMEOUT, written).await {
                Ok(answer) => answer.map_err(|error| error.to_string()),
                Err(_) => Err(format!(
                    "writing the status of ResourceClaim {}/{}: no answer within {CLAIM_READ_TIMEOUT:?}",
                    claim.namespace, claim.name
                )),
            }
        })
    });
    let spawn_publisher: PublisherSpawner = Arc::new(move |target, fence, shutdown| {
        SlicePublisher::spawn_fenced(client.clone(), target, fence, shutdown.clone())
    });
    Ok(DraApi {
        read_claim,
        spawn_publisher,
        write_status,
    })
}
