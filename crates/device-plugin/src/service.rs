//! The `DevicePlugin` gRPC service of one resource: thin translation between
//! the wire messages and [`Resource`] (through [`crate::wire`]), with
//! per-RPC metrics and logs.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt as _};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::v1beta1::{
    AllocateRequest, AllocateResponse, ContainerPreferredAllocationResponse, DevicePluginOptions,
    Empty, ListAndWatchResponse, PreStartContainerRequest, PreStartContainerResponse,
    PreferredAllocationRequest, PreferredAllocationResponse, device_plugin_server::DevicePlugin,
};

use wdp_resource::{DeviceSet, Resource, SharedDeviceSet};

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
    /// The device list the kubelet was last handed on a `ListAndWatch`
    /// stream (`None` while no stream is open).
    shown: Arc<watch::Sender<Option<Shown>>>,
}

/// A device list as a `ListAndWatch` message shows it.
#[derive(Clone)]
struct Shown {
    set: SharedDeviceSet,
    retiring: bool,
}

impl Shown {
    /// Whether the list shows device `id` `Healthy`.
    fn offers(&self, id: &str) -> bool {
        !self.retiring && offers(&self.set, id)
    }
}

/// Whether `set` offers device `id` (known, healthy, not withheld).
fn offers(set: &DeviceSet, id: &str) -> bool {
    set.position(id)
        .is_some_and(|i| set.offers(&set.devices()[i]))
}

/// How long a refusal waits at most for the kubelet to be handed the
/// device list that explains it (a stream the kubelet does not read).
pub const KUBELET_TOLD_WAIT: Duration = Duration::from_secs(2);

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
            shown: Arc::new(watch::Sender::new(None)),
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

    /// After a refusal of devices `ids`: when the kubelet was last shown
    /// one of them `Healthy` that is not offered now (gone, unhealthy,
    /// withheld), waits (at most [`KUBELET_TOLD_WAIT`]) until its
    /// `ListAndWatch` stream has been handed the list that says so, so
    /// the kubelet hears why no later than the refusal.
    async fn tell_kubelet_first<'a>(&self, ids: impl Iterator<Item = &'a String> + Clone) {
        let now = Shown {
            set: self.resource.devices(),
            retiring: *self.retiring.borrow(),
        };
        let stale = |shown: &Option<Shown>| {
            shown
                .as_ref()
                .is_some_and(|shown| ids.clone().any(|id| shown.offers(id) && !now.offers(id)))
        };
        let mut shown = self.shown.subscribe();
        if !stale(&shown.borrow_and_update()) {
            return;
        }
        let told = tokio::time::timeout(KUBELET_TOLD_WAIT, shown.wait_for(|s| !stale(s))).await;
        if told.is_err() {
            tracing::debug!(resource = %self.resource.name(), "the kubelet's ListAndWatch stream was not handed the latest device list in time; refusing anyway");
        }
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
        let shown = |set: &SharedDeviceSet, retiring: bool| Shown {
            set: set.clone(),
            retiring,
        };
        let (set, is_retiring) = (
            updates.borrow_and_update().clone(),
            *retiring.borrow_and_update(),
        );
        let first = (list(&set, is_retiring), shown(&set, is_retiring));
        let handed = self.shown.clone();
        tokio::spawn(async move {
            let gauge = metrics.streams_of(&resource);
            gauge.inc();
            if tx.send(first).await.is_ok() {
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
                    let (set, is_retiring) = (
                        updates.borrow_and_update().clone(),
                        *retiring.borrow_and_update(),
                    );
                    let next = (list(&set, is_retiring), shown(&set, is_retiring));
                    if tx.send(next).await.is_err() {
                        break;
                    }
                }
            }
            gauge.dec();
            handed.send_replace(None);
            tracing::debug!(resource = %resource, "ListAndWatch closed");
        });
        // Each list is recorded as handed to the kubelet when the
        // transport takes it from the stream.
        let handed = self.shown.clone();
        let stream: ListStream = Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx).map(
            move |(message, shown)| {
                handed.send_replace(Some(shown));
                Ok(message)
            },
        ));
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
        let request = request.into_inner();
        let result = async {
            self.refuse_if_retiring()?;
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
        if result.is_err() {
            let ids = request
                .container_requests
                .iter()
                .flat_map(|c| &c.devices_ids);
            self.tell_kubelet_first(ids).await;
        }
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

#[cfg(test)]
#[path = "service_tests.rs"]
mod tests;
