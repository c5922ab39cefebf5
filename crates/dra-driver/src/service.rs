//! The `DRAPlugin` gRPC service of one driver, in `v1` and `v1beta1`
//! (same logic; v1beta1 is a field-for-field conversion). Every claim of a
//! call is read and prepared on its own, concurrently, and gets its own
//! entry: an error in one never fails the call or the other claims.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::{Request, Response, Status};
use wdp_kubelet_api::dra::{v1, v1beta1};

use crate::api_port::ApiPort;
use crate::checkpoint::PreparedDevice;
use crate::claim::ClaimRef;
use crate::metrics::{DraMetrics, DraOperation};
use crate::prepare::ClaimPreparer;

/// The `DRAPlugin` service of one driver (both versions wrap it).
#[derive(Clone)]
pub struct DraPluginService {
    preparer: Arc<ClaimPreparer>,
    api: Arc<dyn ApiPort>,
    metrics: Arc<DraMetrics>,
}

impl std::fmt::Debug for DraPluginService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DraPluginService")
            .field("driver", &self.preparer.driver())
            .finish_non_exhaustive()
    }
}

fn claim_ref(claim: v1::Claim) -> ClaimRef {
    ClaimRef {
        namespace: claim.namespace,
        name: claim.name,
        uid: claim.uid,
    }
}

/// Runs `work` for each claim of a call and answers by UID, in order. A
/// single claim runs in the call's task; several each run in a task of
/// their own, so they proceed in parallel and one claim's guest calls
/// (which run in place on the worker) never hold up another.
/// A claim whose task ends without an answer gets an error of its own.
async fn each_claim<T, Work>(
    mut claims: Vec<v1::Claim>,
    work: impl Fn(ClaimRef) -> Work,
) -> Vec<(String, Result<T, String>)>
where
    T: Send + 'static,
    Work: Future<Output = Result<T, String>> + Send + 'static,
{
    if claims.len() == 1
        && let Some(claim) = claims.pop()
    {
        let claim = claim_ref(claim);
        let uid = claim.uid.clone();
        return vec![(uid, work(claim).await)];
    }
    let tasks: Vec<_> = claims
        .into_iter()
        .map(|claim| {
            let claim = claim_ref(claim);
            (claim.uid.clone(), tokio::spawn(work(claim)))
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for (uid, task) in tasks {
        let outcome = task
            .await
            .unwrap_or_else(|error| Err(format!("claim with UID {uid}: stopped: {error}")));
        answers.push((uid, outcome));
    }
    answers
}

impl DraPluginService {
    /// The service of `preparer`, reading claims through `api`.
    pub fn new(
        preparer: Arc<ClaimPreparer>,
        api: Arc<dyn ApiPort>,
        metrics: Arc<DraMetrics>,
    ) -> Self {
        Self {
            preparer,
            api,
            metrics,
        }
    }

    /// `NodePrepareResources` in v1 terms.
    pub async fn prepare(
        &self,
        request: v1::NodePrepareResourcesRequest,
    ) -> v1::NodePrepareResourcesResponse {
        let started = Instant::now();
        let answers = each_claim(request.claims, |claim| {
            let me = self.clone();
            async move { me.prepare_claim(claim).await }
        })
        .await;
        let failed = answers.iter().any(|(_, outcome)| outcome.is_err());
        self.observe("NodePrepareResources", failed, started.elapsed());
        v1::NodePrepareResourcesResponse {
            claims: answers
                .into_iter()
                .map(|(uid, outcome)| {
                    let entry = match outcome {
                        Ok(devices) => v1::NodePrepareResourceResponse {
                            devices: devices
                                .into_iter()
                                .map(|d| v1::Device {
                                    request_names: d.request_names,
                                    pool_name: d.pool_name,
                                    device_name: d.device_name,
                                    cdi_device_ids: d.cdi_device_ids,
                                    share_id: d.share_id,
                                })
                                .collect(),
                            error: String::new(),
                        },
                        Err(error) => {
                            tracing::warn!(driver = %self.preparer.driver(), %error, "claim not prepared");
                            v1::NodePrepareResourceResponse {
                                devices: Vec::new(),
                                error,
                            }
                        }
                    };
                    (uid, entry)
                })
                .collect(),
        }
    }

    /// `NodeUnprepareResources` in v1 terms.
    pub async fn unprepare(
        &self,
        request: v1::NodeUnprepareResourcesRequest,
    ) -> v1::NodeUnprepareResourcesResponse {
        let started = Instant::now();
        let answers = each_claim(request.claims, |claim| {
            let me = self.clone();
            async move { me.unprepare_claim(claim).await }
        })
        .await;
        let failed = answers.iter().any(|(_, outcome)| outcome.is_err());
        self.observe("NodeUnprepareResources", failed, started.elapsed());
        v1::NodeUnprepareResourcesResponse {
            claims: answers
                .into_iter()
                .map(|(uid, outcome)| {
                    let error = outcome.err().unwrap_or_default();
                    if !error.is_empty() {
                        tracing::warn!(driver = %self.preparer.driver(), %error, "claim not unprepared");
                    }
                    (uid, v1::NodeUnprepareResourceResponse { error })
                })
                .collect(),
        }
    }

    /// Prepares one claim of a call.
    async fn prepare_claim(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        let started = Instant::now();
        let read = if self.preparer.is_prepared(&claim.uid).await {
            // Idempotent: the checkpoint answers without the API server.
            Ok(None)
        } else {
            self.api.read_claim(&claim).await
        };
        let outcome = self.preparer.prepare(&claim, read).await;
        self.metrics.observe_claim(
            self.preparer.driver(),
            DraOperation::Prepare,
            outcome.is_ok(),
            started.elapsed(),
        );
        outcome
    }

    /// Unprepares one claim of a call.
    async fn unprepare_claim(&self, claim: ClaimRef) -> Result<(), String> {
        let started = Instant::now();
        let outcome = self.preparer.unprepare(&claim).await;
        self.metrics.observe_claim(
            self.preparer.driver(),
            DraOperation::Unprepare,
            outcome.is_ok(),
            started.elapsed(),
        );
        outcome
    }

    fn observe(&self, rpc: &str, failed: bool, elapsed: Duration) {
        let code = if failed {
            tonic::Code::FailedPrecondition
        } else {
            tonic::Code::Ok
        };
        self.metrics.kubelet.observe_rpc(
            self.preparer.resource().name(),
            rpc,
            &format!("{code:?}"),
            elapsed,
        );
    }
}

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for DraPluginService {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        Ok(Response::new(self.prepare(request.into_inner()).await))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        Ok(Response::new(self.unprepare(request.into_inner()).await))
    }
}

/// The same service in `v1beta1` terms.
#[derive(Clone, Debug)]
pub struct DraPluginV1beta1(pub DraPluginService);

fn claims_from_beta(claims: Vec<v1beta1::Claim>) -> Vec<v1::Claim> {
    claims
        .into_iter()
        .map(|c| v1::Claim {
            namespace: c.namespace,
            uid: c.uid,
            name: c.name,
        })
        .collect()
}

#[tonic::async_trait]
impl v1beta1::dra_plugin_server::DraPlugin for DraPluginV1beta1 {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        let request = v1::NodePrepareResourcesRequest {
            claims: claims_from_beta(request.into_inner().claims),
        };
        let answer = self.0.prepare(request).await;
        let claims: HashMap<String, v1beta1::NodePrepareResourceResponse> = answer
            .claims
            .into_iter()
            .map(|(uid, entry)| {
                let entry = v1beta1::NodePrepareResourceResponse {
                    devices: entry
                        .devices
                        .into_iter()
                        .map(|d| v1beta1::Device {
                            request_names: d.request_names,
                            pool_name: d.pool_name,
                            device_name: d.device_name,
                            cdi_device_ids: d.cdi_device_ids,
                        })
                        .collect(),
                    error: entry.error,
                };
                (uid, entry)
            })
            .collect();
        Ok(Response::new(v1beta1::NodePrepareResourcesResponse {
            claims,
        }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1beta1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodeUnprepareResourcesResponse>, Status> {
        let request = v1::NodeUnprepareResourcesRequest {
            claims: claims_from_beta(request.into_inner().claims),
        };
        let answer = self.0.unprepare(request).await;
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse {
            claims: answer
                .claims
                .into_iter()
                .map(|(uid, entry)| {
                    (
                        uid,
                        v1beta1::NodeUnprepareResourceResponse { error: entry.error },
                    )
                })
                .collect(),
        }))
    }
}
