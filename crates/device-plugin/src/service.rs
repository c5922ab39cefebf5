//! The `DevicePlugin` gRPC service of one resource: thin translation between
//! the wire messages and [`Resource`] (through [`crate::wire`]), with
//! per-RPC metrics and logs.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use futures::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerPreferredAllocationResponse, DevicePluginOptions,
    Empty, ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, device_plugin_server::DevicePlugin,
};

use wdp_resource::Resource;

use crate::metrics::DevicePluginMetrics;
use crate::wire::{
    blamed_guest, device_list, kubelet_response, kubelet_status, plugin_options,
    retiring_device_list,
};

/// Serves one resource until `stop` is cancelled; `ListAndWatch` streams
/// end when it is, so the server's graceful shutdown completes.
#[derive(Clone)]
pub struct DevicePluginService {
    resource: Arc<Resource>,
    metrics: Arc<DevicePluginMetrics>,
    stop: CancellationToken,
    /// `true` while the resource is handed over to DRA: no device offered.
    retiring: watch::Receiver<bool>,
    /// Holds a token for each call being answered (not `ListAndWatch`).
    calls: TaskTracker,
}

impl DevicePluginService {
    /// The service of `resource`, counted in `metrics`, ending its
    /// streams when `stop` fires.
    pub fn new(
        resource: Arc<Resource>,
        metrics: Arc<DevicePluginMetrics>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            resource,
            metrics,
            stop,
            retiring: watch::Sender::new(false).subscribe(),
            calls: TaskTracker::new(),
        }
    }

    /// The same service, counting each call being answered (every RPC but
    /// `ListAndWatch`) in `calls`: a server about to be left to the
    /// process's exit waits for them.
    pub fn with_calls(mut self, calls: TaskTracker) -> Self {
        self.calls = calls;
        self
    }

    /// The same service, offering no device while `retiring` is `true`
    /// (see `ServerHandle::set_retiring`).
    pub fn with_retiring(mut self, retiring: watch::Receiver<bool>) -> Self {
        self.retiring = retiring;
        self
    }

    /// Refuses an admission while the resource is handed over to DRA.
    fn refuse_if_retiring(&self) -> Result<(), Status> {
        if *self.retiring.borrow() {
            return Err(Status::failed_precondition(format!(
                "{} is being handed over to DRA: the device-plugin API offers no device of it any more",
                self.resource.name()
            )));
        }
        Ok(())
    }

    fn finish<T>(
        &self,
        rpc: &str,
        started: Instant,
        result: Result<T, Status>,
    ) -> Result<T, Status> {
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(status) => {
                match blamed_guest(status) {
                    Some((guest, hook)) => {
                        tracing::warn!(resource = %self.resource.name(), guest, hook, rpc, code = ?status.code(), message = status.message(), "RPC refused");
                    }
                    None => {
                        tracing::warn!(resource = %self.resource.name(), rpc, code = ?status.code(), message = status.message(), "RPC refused");
                    }
                }
                status.code()
            }
        };
        self.metrics.kubelet.observe_rpc(
            self.resource.name(),
            rpc,
            &format!("{code:?}"),
            started.elapsed(),
        );
        result
    }
}

type ListStream = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for DevicePluginService {
    async fn get_device_plugin_options(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        let _call = self.calls.token();
        Ok(Response::new(plugin_options(&self.resource)))
    }

    type ListAndWatchStream = ListStream;

    async fn list_and_watch(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        // A resource registered while its first scan runs has nothing to
        // list until the scan ends: the first message is the full list.
        tokio::select! {
            _ = self.resource.wait_first_scan() => {}
            _ = self.stop.cancelled() => return Err(Status::unavailable("the plugin is stopping")),
        }
        let mut updates = self.resource.subscribe();
        let mut retiring = self.retiring.clone();
        let stop = self.stop.clone();
        let metrics = self.metrics.clone();
        let resource = self.resource.name().to_owned();
        tracing::debug!(resource = %resource, "ListAndWatch opened");
        // The first message is the full list, sent before the task starts.
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let list = |set: &wdp_resource::DeviceSet, retiring: bool| match retiring {
            true => retiring_device_list(set),
            false => device_list(set),
        };
        let first = list(&updates.borrow_and_update(), *retiring.borrow_and_update());
        tokio::spawn(async move {
            let gauge = metrics.streams_of(&resource);
            gauge.inc();
            if tx.send(Ok(first)).await.is_ok() {
                // A service made without a retiring switch has nobody to
                // flip it: its `changed` ends at once, and is not awaited.
                let mut may_retire = true;
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        _ = tx.closed() => break,
                        changed = updates.changed() => if changed.is_err() {
                            break;
                        },
                        changed = retiring.changed(), if may_retire => if changed.is_err() {
                            may_retire = false;
                            continue;
                        },
                    }
                    let next = list(&updates.borrow_and_update(), *retiring.borrow_and_update());
                    if tx.send(Ok(next)).await.is_err() {
                        break;
                    }
                }
            }
            gauge.dec();
            tracing::debug!(resource = %resource, "ListAndWatch closed");
        });
        let stream: ListStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx));
        Ok(Response::new(stream))
    }

    async fn get_preferred_allocation(
        &self,
        request: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        let _call = self.calls.token();
        let started = Instant::now();
        let result = async {
            self.refuse_if_retiring()?;
            let request = request.into_inner();
            let mut container_responses = Vec::with_capacity(request.container_requests.len());
            for c in &request.container_requests {
                let ids = self
                    .resource
                    .preferred(
                        &c.available_device_i_ds,
                        &c.must_include_device_i_ds,
                        c.allocation_size,
                    )
                    .await
                    .map_err(kubelet_status)?;
                container_responses.push(ContainerPreferredAllocationResponse { device_i_ds: ids });
            }
            Ok(PreferredAllocationResponse {
                container_responses,
            })
        }
        .await;
        self.finish("GetPreferredAllocation", started, result)
            .map(Response::new)
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let _call = self.calls.token();
        let started = Instant::now();
        let result = async {
            self.refuse_if_retiring()?;
            let request = request.into_inner();
            if request.container_requests.is_empty() {
                return Err(Status::invalid_argument("Allocate without container requests"));
            }
            let mut container_responses = Vec::with_capacity(request.container_requests.len());
            for c in &request.container_requests {
                let grant = self
                    .resource
                    .allocate(&c.devices_ids)
                    .await
                    .map_err(kubelet_status)?;
                container_responses.push(kubelet_response(grant));
            }
            tracing::debug!(resource = %self.resource.name(), devices = ?request.container_requests.iter().map(|c| &c.devices_ids).collect::<Vec<_>>(), "allocated");
            Ok(AllocateResponse {
                container_responses,
            })
        }
        .await;
        self.finish("Allocate", started, result).map(Response::new)
    }

    async fn pre_start_container(
        &self,
        request: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        let _call = self.calls.token();
        let started = Instant::now();
        let request = request.into_inner();
        let result = self
            .resource
            .pre_start(&request.devices_ids)
            .await
            .map_err(kubelet_status);
        self.finish("PreStartContainer", started, result)
            .map(|()| Response::new(PreStartContainerResponse {}))
    }
}
