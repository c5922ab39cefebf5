//! The DRA drivers' port to the Kubernetes API server
//! ([`wdp_dra_driver::ApiPort`]), implemented over `wdp-dra-client`: made
//! once, when the first DRA resource is served (a host with only
//! device-plugin resources never talks to the API server), from
//! `--kubeconfig` or the in-cluster configuration. It reads claims, writes
//! their device statuses (each within [`CLAIM_CALL_TIMEOUT`]) and starts
//! one ResourceSlice publisher per driver.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::resource::v1::ResourceClaim;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{Client, PoolTarget, PublisherHandle, SlicePublisher, WriteFence};
use wdp_dra_driver::{ApiPort, ApiPortError, ClaimRef, DraError, StatusWrite};

/// How long a claim read or status write may take: well inside the
/// kubelet's 45 s for a whole `NodePrepareResources` call, so a hung API
/// server fails the claim with a reason instead of the call with a
/// deadline.
pub(crate) const CLAIM_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The API server, through one `wdp-dra-client` client.
struct KubeApi {
    client: Client,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi").finish_non_exhaustive()
    }
}

/// Connects to the API server `kubeconfig` names, or the in-cluster one
/// when `None` (no request is made yet: an unreachable server shows in the
/// publishers' status, never here). `file` is the DRA resource that needs
/// it, for the error.
pub(crate) async fn connect(
    kubeconfig: Option<&Path>,
    file: &Path,
) -> Result<Arc<dyn ApiPort>, DraError> {
    let client =
        wdp_dra_client::client(kubeconfig)
            .await
            .map_err(|source| DraError::NoApiClient {
                file: file.to_owned(),
                source,
            })?;
    Ok(Arc::new(KubeApi { client }))
}

/// `call`'s answer, or [`ApiPortError::NoAnswer`] naming `what` once
/// [`CLAIM_CALL_TIMEOUT`] passed.
async fn within_timeout<T>(
    what: impl FnOnce() -> String,
    call: impl Future<Output = Result<T, wdp_dra_client::ApiError>>,
) -> Result<T, ApiPortError> {
    match tokio::time::timeout(CLAIM_CALL_TIMEOUT, call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(ApiPortError::NoAnswer {
            what: what(),
            after: CLAIM_CALL_TIMEOUT,
        }),
    }
}

impl ApiPort for KubeApi {
    fn read_claim(
        &self,
        claim: &ClaimRef,
    ) -> BoxFuture<'static, Result<Option<ResourceClaim>, ApiPortError>> {
        let client = self.client.clone();
        let claim = claim.clone();
        Box::pin(async move {
            within_timeout(
                || format!("reading ResourceClaim {}/{}", claim.namespace, claim.name),
                wdp_dra_client::get_claim(&client, &claim.namespace, &claim.name),
            )
            .await
        })
    }

    fn write_status(&self, write: StatusWrite) -> BoxFuture<'static, Result<(), ApiPortError>> {
        let client = self.client.clone();
        let StatusWrite {
            claim,
            driver,
            pool,
            statuses,
        } = write;
        Box::pin(async move {
            within_timeout(
                || {
                    format!(
                        "writing the status of ResourceClaim {}/{}",
                        claim.namespace, claim.name
                    )
                },
                wdp_dra_client::write_device_status(
                    &client,
                    &claim.namespace,
                    &claim.name,
                    &claim.uid,
                    &driver,
                    &pool,
                    statuses,
                ),
            )
            .await
        })
    }

    fn watch_claims(&self) -> futures::stream::BoxStream<'static, wdp_dra_client::ClaimEvent> {
        wdp_dra_client::watch_claims(self.client.clone())
    }

    fn spawn_publisher(
        &self,
        target: PoolTarget,
        fence: WriteFence,
        shutdown: &CancellationToken,
    ) -> PublisherHandle {
        SlicePublisher::spawn_fenced(self.client.clone(), target, fence, shutdown.clone())
    }
}
