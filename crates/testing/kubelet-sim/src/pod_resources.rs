//! The kubelet's PodResources API (`v1.PodResourcesLister`) as the
//! simulated kubelet serves it: `List` and `Get` answer its pods (each
//! container's device-plugin devices under their resource name),
//! `GetAllocatableResources` the healthy devices of streaming plugins.
//!
//! Modelled on the kubelet of Kubernetes 1.34–1.37: the socket is rate
//! limited for all callers together (a token bucket of 100 calls a second,
//! burst 10; past it a call fails `ResourceExhausted` "rejected by rate
//! limit"), and `Get` is served (beta, on by default, from 1.34).
//!
//! Faults a test can set ([`PodResourcesFault`]): every call slow, every
//! call refused, or an answer that is no valid
//! `ListPodResourcesResponse` (a field of the wrong wire type, which the
//! client's decoder refuses). A missing socket is [`PodResourcesServer::stop`].

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::pod_resources::v1::{
    AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices,
    ContainerResources, GetPodResourcesRequest, GetPodResourcesResponse, ListPodResourcesRequest,
    ListPodResourcesResponse, PodResources,
    pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer},
};

use crate::error::SimError;
use crate::state::{SimPod, SimState};

/// What the PodResources server does wrong, on purpose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PodResourcesFault {
    /// Nothing: it answers.
    #[default]
    None,
    /// Every call answers after this long.
    Slow(Duration),
    /// Every call fails `Unavailable`.
    Refuse,
    /// Every `List` answers bytes that do not decode as its response.
    Garbage,
}

/// A running PodResources server; stopping or dropping it removes the
/// socket.
#[derive(Debug)]
pub struct PodResourcesServer {
    socket: PathBuf,
    fault: Arc<Mutex<PodResourcesFault>>,
    calls: Arc<Mutex<u64>>,
    stop: CancellationToken,
}

impl PodResourcesServer {
    pub(crate) fn start(
        socket: PathBuf,
        state: Arc<watch::Sender<SimState>>,
    ) -> Result<Self, SimError> {
        if let Some(parent) = socket.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket).map_err(|source| SimError::Bind {
            path: socket.clone(),
            source,
        })?;
        let fault = Arc::new(Mutex::new(PodResourcesFault::None));
        let calls = Arc::new(Mutex::new(0));
        let service = Lister {
            state,
            fault: fault.clone(),
            bucket: Arc::new(Mutex::new(TokenBucket::new())),
        };
        let stop = CancellationToken::new();
        let token = stop.clone();
        let garbage = fault.clone();
        let counted = calls.clone();
        tokio::spawn(async move {
            let routes = tonic::service::Routes::new(PodResourcesListerServer::new(service));
            let result = tonic::transport::Server::builder()
                .layer(tower::layer::layer_fn(move |inner| GarbageList {
                    inner,
                    fault: garbage.clone(),
                    calls: counted.clone(),
                }))
                .add_routes(routes)
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), token.cancelled())
                .await;
            if let Err(error) = result {
                tracing::warn!(%error, "simulated PodResources server ended");
            }
        });
        Ok(Self {
            socket,
            fault,
            calls,
            stop,
        })
    }

    /// The socket it serves.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Sets the fault every call from now on meets.
    pub fn set_fault(&self, fault: PodResourcesFault) {
        *self.fault.lock().unwrap_or_else(PoisonError::into_inner) = fault;
    }

    /// How many calls it received.
    pub fn calls(&self) -> u64 {
        *self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops serving and removes the socket.
    pub fn stop(&self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for PodResourcesServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The kubelet's rate limit of the socket: 100 tokens a second, 10 at most.
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    const QPS: f64 = wdp_kubelet_api::pod_resources::KUBELET_QPS as f64;
    const BURST: f64 = wdp_kubelet_api::pod_resources::KUBELET_BURST as f64;

    fn new() -> Self {
        Self {
            tokens: Self::BURST,
            last: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * Self::QPS;
        self.tokens = (self.tokens + refill).min(Self::BURST);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Clone)]
struct Lister {
    state: Arc<watch::Sender<SimState>>,
    fault: Arc<Mutex<PodResourcesFault>>,
    bucket: Arc<Mutex<TokenBucket>>,
}

impl Lister {
    /// Applies the rate limit and the fault.
    async fn admit(&self) -> Result<(), Status> {
        if !self
            .bucket
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            return Err(Status::resource_exhausted("rejected by rate limit"));
        }
        let fault = *self.fault.lock().unwrap_or_else(PoisonError::into_inner);
        match fault {
            PodResourcesFault::Slow(delay) => tokio::time::sleep(delay).await,
            PodResourcesFault::Refuse => {
                return Err(Status::unavailable("simulated PodResources refusal"));
            }
            PodResourcesFault::None | PodResourcesFault::Garbage => {}
        }
        Ok(())
    }
}

fn pod_resources(name: &str, pod: &SimPod) -> PodResources {
    PodResources {
        name: name.to_owned(),
        namespace: "default".to_owned(),
        containers: vec![ContainerResources {
            name: pod.container.clone(),
            devices: vec![ContainerDevices {
                resource_name: pod.resource.clone(),
                device_ids: pod.devices.clone(),
                topology: None,
            }],
            ..ContainerResources::default()
        }],
        ..PodResources::default()
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Lister {
    async fn list(
        &self,
        _request: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        self.admit().await?;
        let state = self.state.borrow();
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: state
                .pods
                .iter()
                .map(|(name, pod)| pod_resources(name, pod))
                .collect(),
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _request: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        self.admit().await?;
        let state = self.state.borrow();
        Ok(Response::new(AllocatableResourcesResponse {
            devices: state
                .plugins
                .iter()
                .filter(|(_, record)| record.streaming)
                .map(|(resource, record)| ContainerDevices {
                    resource_name: resource.clone(),
                    device_ids: record.healthy_ids(),
                    topology: None,
                })
                .collect(),
            ..AllocatableResourcesResponse::default()
        }))
    }

    async fn get(
        &self,
        request: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        self.admit().await?;
        let request = request.into_inner();
        let state = self.state.borrow();
        match state.pods.get(&request.pod_name) {
            Some(pod) if request.pod_namespace == "default" => {
                Ok(Response::new(GetPodResourcesResponse {
                    pod_resources: Some(pod_resources(&request.pod_name, pod)),
                }))
            }
            _ => Err(Status::not_found(format!(
                "pod {}/{} not found",
                request.pod_namespace, request.pod_name
            ))),
        }
    }
}

/// The `List` path.
const LIST_PATH: &str = "/v1.PodResourcesLister/List";

/// A message whose field 1 is a varint, where `ListPodResourcesResponse`
/// has a repeated message: valid protobuf, not a valid answer.
#[derive(Clone, PartialEq, prost::Message)]
struct Garbage {
    #[prost(uint64, tag = "1")]
    pod_resources: u64,
}

/// Counts every call, and answers `List` with [`Garbage`] while the
/// fault says so; every other call goes through.
#[derive(Clone)]
struct GarbageList<S> {
    inner: S,
    fault: Arc<Mutex<PodResourcesFault>>,
    calls: Arc<Mutex<u64>>,
}

/// The unary handler that answers [`Garbage`].
struct GarbageAnswer;

impl tonic::server::UnaryService<ListPodResourcesRequest> for GarbageAnswer {
    type Response = Garbage;
    type Future = std::future::Ready<Result<Response<Garbage>, Status>>;

    fn call(&mut self, _request: Request<ListPodResourcesRequest>) -> Self::Future {
        std::future::ready(Ok(Response::new(Garbage {
            pod_resources: u64::MAX,
        })))
    }
}

type BoxedResponse = std::pin::Pin<
    Box<
        dyn std::future::Future<
                Output = Result<
                    tonic::codegen::http::Response<tonic::body::Body>,
                    std::convert::Infallible,
                >,
            > + Send,
    >,
>;

impl<S> tower::Service<tonic::codegen::http::Request<tonic::body::Body>> for GarbageList<S>
where
    S: tower::Service<
            tonic::codegen::http::Request<tonic::body::Body>,
            Response = tonic::codegen::http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxedResponse;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        *self.calls.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        let garbage = *self.fault.lock().unwrap_or_else(PoisonError::into_inner)
            == PodResourcesFault::Garbage;
        if garbage && request.uri().path() == LIST_PATH {
            return Box::pin(async move {
                let codec = tonic_prost::ProstCodec::<Garbage, ListPodResourcesRequest>::default();
                Ok(tonic::server::Grpc::new(codec)
                    .unary(GarbageAnswer, request)
                    .await)
            });
        }
        Box::pin(self.inner.call(request))
    }
}
