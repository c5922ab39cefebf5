//! The kubelet's side of the `kubelet.sock` path: the `Registration`
//! service the simulated kubelet serves, which dials a registering plugin
//! back inside `Register` (as the kubelet does), and the consumer of each
//! plugin's `ListAndWatch` stream.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::v1beta1::{
    self, Empty, RegisterRequest,
    device_plugin_client::DevicePluginClient,
    registration_server::{Registration, RegistrationServer},
};

use crate::error::SimError;
use crate::plugin_client::dial;
use crate::state::{PluginRecord, SimState};

pub(crate) fn serve(
    dir: &Path,
    state: Arc<watch::Sender<SimState>>,
) -> Result<CancellationToken, SimError> {
    let path = dir.join(v1beta1::KUBELET_SOCKET);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|source| SimError::Bind {
        path: path.clone(),
        source,
    })?;
    let stop = CancellationToken::new();
    let service = RegistrationService {
        dir: dir.to_owned(),
        state,
        stop: stop.clone(),
    };
    let token = stop.clone();
    tokio::spawn(async move {
        let result = tonic::transport::Server::builder()
            .add_service(RegistrationServer::new(service))
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), token.cancelled())
            .await;
        if let Err(error) = result {
            tracing::warn!(%error, "simulated kubelet server ended");
        }
    });
    Ok(stop)
}

struct RegistrationService {
    dir: PathBuf,
    state: Arc<watch::Sender<SimState>>,
    /// Cancelled when this kubelet instance stops; ends its streams.
    stop: CancellationToken,
}

impl RegistrationService {
    fn refuse(&self, reason: String) -> Status {
        self.state.send_modify(|s| s.refusals.push(reason.clone()));
        Status::invalid_argument(reason)
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        let request = request.into_inner();
        if request.version != v1beta1::VERSION {
            return Err(self.refuse(format!("unsupported API version {:?}", request.version)));
        }
        if !is_extended_resource_name(&request.resource_name) {
            return Err(self.refuse(format!(
                "invalid extended resource name {:?}",
                request.resource_name
            )));
        }
        if request.endpoint.is_empty() || request.endpoint.contains('/') {
            return Err(self.refuse(format!(
                "endpoint {:?} is not a file name in the plugin folder",
                request.endpoint
            )));
        }
        // Like the kubelet: dial back and ask for the options inside Register.
        let path = self.dir.join(&request.endpoint);
        let mut client = dial(&path).await.map_err(|e| self.refuse(e.to_string()))?;
        let options = client
            .get_device_plugin_options(Empty {})
            .await
            .map_err(|status| self.refuse(format!("GetDevicePluginOptions failed: {status}")))?
            .into_inner();
        let registered = request.options.unwrap_or_default();
        if options != registered {
            return Err(self.refuse(format!(
                "{}: GetDevicePluginOptions {options:?} disagrees with the registration {registered:?}",
                request.resource_name
            )));
        }
        let resource = request.resource_name.clone();
        let stream_id = NEXT_STREAM.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.state.send_modify(|s| {
            let registrations = s.plugins.get(&resource).map_or(0, |p| p.registrations) + 1;
            s.plugins.insert(
                resource.clone(),
                PluginRecord {
                    registration: request.clone(),
                    registrations,
                    registered_at: Instant::now(),
                    devices: Vec::new(),
                    lists_received: 0,
                    streaming: false,
                    stopped_at: None,
                    stream_id,
                },
            );
        });
        tokio::spawn(list_and_watch(
            client,
            resource,
            stream_id,
            self.state.clone(),
            self.stop.clone(),
        ));
        Ok(Response::new(Empty {}))
    }
}

/// Consumes a plugin's `ListAndWatch` stream into the state.
static NEXT_STREAM: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

async fn list_and_watch(
    mut client: DevicePluginClient<tonic::transport::Channel>,
    resource: String,
    stream_id: u64,
    state: Arc<watch::Sender<SimState>>,
    stop: CancellationToken,
) {
    let mut stream = match client.list_and_watch(Empty {}).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            state.send_modify(|s| {
                s.violations
                    .push(format!("{resource}: ListAndWatch refused: {status}"))
            });
            return;
        }
    };
    fn ours<'a>(
        s: &'a mut SimState,
        resource: &str,
        stream_id: u64,
    ) -> Option<&'a mut PluginRecord> {
        s.plugins
            .get_mut(resource)
            .filter(|p| p.stream_id == stream_id)
    }
    state.send_modify(|s| {
        if let Some(p) = ours(s, &resource, stream_id) {
            p.streaming = true;
        }
    });
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(Ok(list)) = next else { break };
        state.send_modify(|s| {
            for d in &list.devices {
                if d.health != v1beta1::HEALTHY && d.health != v1beta1::UNHEALTHY {
                    s.violations.push(format!(
                        "{resource}: device {} has health {:?}",
                        d.id, d.health
                    ));
                }
                if d.id.len() > 63 {
                    s.violations.push(format!(
                        "{resource}: device ID {:?} is longer than 63",
                        d.id
                    ));
                }
            }
            if let Some(p) = ours(s, &resource, stream_id) {
                p.devices = list.devices;
                p.lists_received += 1;
            }
        });
    }
    // The kubelet marks every device unhealthy when the stream ends.
    state.send_modify(|s| {
        if let Some(p) = ours(s, &resource, stream_id) {
            p.streaming = false;
            p.stopped_at = Some(Instant::now());
            for d in &mut p.devices {
                d.health = v1beta1::UNHEALTHY.to_owned();
            }
        }
    });
}

/// The kubelet's `IsExtendedResourceName`, simplified: `domain/name`, the
/// domain not `kubernetes.io`, and no `requests.` prefix.
pub(crate) fn is_extended_resource_name(name: &str) -> bool {
    let Some((domain, local)) = name.split_once('/') else {
        return false;
    };
    !domain.is_empty()
        && !local.is_empty()
        && !local.contains('/')
        && domain != "kubernetes.io"
        && !domain.ends_with(".kubernetes.io")
        && !name.starts_with("requests.")
        && domain
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
}
