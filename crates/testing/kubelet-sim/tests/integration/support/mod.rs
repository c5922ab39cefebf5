//! A small DRA driver for the simulated kubelet's tests: a registration
//! socket in the registry folder ([`registration_socket`]) and a tonic
//! server on `<plugins>/<driver>/dra.sock` serving `DRAPlugin` v1 and
//! v1beta1 and `DRAResourceHealth` v1 and v1alpha1.

pub mod registration_socket;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use registration_socket::RegistrationSocket;
use tempfile::TempDir;
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio_stream::wrappers::{UnixListenerStream, WatchStream};
use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::dra::{v1, v1beta1};
use wdp_kubelet_api::dra_health;
use wdp_kubelet_api::pluginregistration::{DRA_PLUGIN_TYPE, PluginInfo};

/// Generous bound for events that normally take milliseconds.
pub const WAIT: Duration = Duration::from_secs(20);

/// A device's health as the test driver reports it: (pool, device,
/// `HealthStatus` value, message).
pub type Reported = (String, String, i32, String);

/// How the test driver behaves.
#[derive(Clone)]
pub struct DriverSpec {
    pub name: String,
    pub supported_versions: Vec<String>,
    /// Answer `NodeWatchResources` with `Unimplemented`.
    pub health_unimplemented: bool,
    /// Claim UIDs left out of `NodePrepareResources` answers.
    pub omit_claims: Vec<String>,
    /// Never answer `NodePrepareResources` (v1).
    pub hang_prepare: bool,
}

impl DriverSpec {
    pub fn new(name: &str, supported_versions: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            supported_versions: supported_versions.iter().map(|s| (*s).to_owned()).collect(),
            health_unimplemented: false,
            omit_claims: Vec::new(),
            hang_prepare: false,
        }
    }
}

/// What the driver saw, shared with its services.
#[derive(Default)]
struct Seen {
    /// Calls in order, e.g. `v1beta1 NodePrepareResources`.
    calls: Vec<String>,
    /// Claim UIDs prepared and not yet unprepared.
    prepared: BTreeSet<String>,
    /// The `grpc-timeout` of every prepare/unprepare call, as sent.
    deadlines: Vec<String>,
}

/// A running test driver and the folders it lives in.
pub struct TestDriver {
    pub tmp: TempDir,
    pub spec: DriverSpec,
    pub registration: Option<RegistrationSocket>,
    /// Set the reported health; every health stream sends each value.
    pub health: watch::Sender<Vec<Reported>>,
    /// Bumping it ends every open health stream.
    pub end_streams: watch::Sender<u64>,
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
}

impl Drop for TestDriver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestDriver {
    /// Serves the DRA endpoint, then the registration socket.
    pub async fn start(spec: DriverSpec) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("wdp-dra-sim-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(tmp.path().join("registry")).unwrap();
        let endpoint = tmp.path().join("plugins").join(&spec.name).join("dra.sock");
        std::fs::create_dir_all(endpoint.parent().unwrap()).unwrap();
        let (health, _) = watch::channel(Vec::new());
        let (end_streams, _) = watch::channel(0);
        let mut driver = Self {
            tmp,
            spec,
            registration: None,
            health,
            end_streams,
            seen: Arc::default(),
            stop: CancellationToken::new(),
        };
        driver.serve_endpoint(&endpoint);
        driver.serve_registration();
        driver
    }

    pub fn registry(&self) -> PathBuf {
        self.tmp.path().join("registry")
    }

    pub fn endpoint(&self) -> PathBuf {
        self.tmp
            .path()
            .join("plugins")
            .join(&self.spec.name)
            .join("dra.sock")
    }

    pub fn registration_path(&self) -> PathBuf {
        self.registry().join(format!("{}-reg.sock", self.spec.name))
    }

    /// (Re)creates the registration socket, as a driver does after the
    /// kubelet deleted it.
    pub fn serve_registration(&mut self) {
        let info = PluginInfo {
            r#type: DRA_PLUGIN_TYPE.to_owned(),
            name: self.spec.name.clone(),
            endpoint: self.endpoint().to_string_lossy().into_owned(),
            supported_versions: self.spec.supported_versions.clone(),
        };
        self.registration = Some(RegistrationSocket::serve(&self.registration_path(), info));
    }

    pub fn calls(&self) -> Vec<String> {
        self.seen.lock().unwrap().calls.clone()
    }

    pub fn prepared(&self) -> BTreeSet<String> {
        self.seen.lock().unwrap().prepared.clone()
    }

    pub fn deadlines(&self) -> Vec<String> {
        self.seen.lock().unwrap().deadlines.clone()
    }

    fn serve_endpoint(&self, path: &Path) {
        let listener = UnixListener::bind(path).unwrap();
        let service = DriverService {
            spec: self.spec.clone(),
            seen: self.seen.clone(),
            health: self.health.subscribe(),
            end_streams: self.end_streams.subscribe(),
        };
        let stop = self.stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(v1::dra_plugin_server::DraPluginServer::new(service.clone()))
                .add_service(v1beta1::dra_plugin_server::DraPluginServer::new(
                    service.clone(),
                ))
                .add_service(
                    dra_health::v1::dra_resource_health_server::DraResourceHealthServer::new(
                        service.clone(),
                    ),
                )
                .add_service(
                    dra_health::v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(
                        service,
                    ),
                )
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), stop.cancelled())
                .await
                .unwrap();
        });
    }
}

#[derive(Clone)]
struct DriverService {
    spec: DriverSpec,
    seen: Arc<Mutex<Seen>>,
    health: watch::Receiver<Vec<Reported>>,
    end_streams: watch::Receiver<u64>,
}

/// The claims of a request as (uid, name), whatever its version.
type Asked = Vec<(String, String)>;

impl DriverService {
    fn note(&self, call: &str) {
        self.seen.lock().unwrap().calls.push(call.to_owned());
    }

    fn note_deadline<T>(&self, request: &Request<T>) {
        let deadline = request
            .metadata()
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("none")
            .to_owned();
        self.seen.lock().unwrap().deadlines.push(deadline);
    }

    /// UIDs to answer for, after the ones the spec leaves out.
    fn prepare(&self, version: &str, asked: Asked) -> Vec<(String, String)> {
        self.note(&format!("{version} NodePrepareResources"));
        let answered: Vec<_> = asked
            .into_iter()
            .filter(|(uid, _)| !self.spec.omit_claims.contains(uid))
            .collect();
        let mut seen = self.seen.lock().unwrap();
        seen.prepared
            .extend(answered.iter().map(|(uid, _)| uid.clone()));
        answered
    }

    fn unprepare(&self, version: &str, asked: Asked) -> Vec<String> {
        self.note(&format!("{version} NodeUnprepareResources"));
        let mut seen = self.seen.lock().unwrap();
        asked
            .into_iter()
            .map(|(uid, _)| {
                seen.prepared.remove(&uid);
                uid
            })
            .collect()
    }

    /// The stream of health lists: the current one, then every change,
    /// until `end_streams` changes.
    fn health_stream(&self, version: &str) -> Result<HealthLists, Status> {
        self.note(&format!("{version} NodeWatchResources"));
        if self.spec.health_unimplemented {
            return Err(Status::unimplemented("no health here"));
        }
        let lists = WatchStream::new(self.health.clone()).map(Some);
        let mut ends = self.end_streams.clone();
        ends.mark_unchanged();
        let end = WatchStream::from_changes(ends).map(|_| None);
        Ok(Box::pin(lists.merge(end).map_while(|list| list)))
    }
}

type HealthLists = Pin<Box<dyn Stream<Item = Vec<Reported>> + Send>>;

fn cdi_id(driver: &str, claim_name: &str) -> String {
    format!("{driver}/claim={claim_name}")
}

#[tonic::async_trait]
impl v1::dra_plugin_server::DraPlugin for DriverService {
    async fn node_prepare_resources(
        &self,
        request: Request<v1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1::NodePrepareResourcesResponse>, Status> {
        self.note_deadline(&request);
        if self.spec.hang_prepare {
            self.note("v1 NodePrepareResources (hanging)");
            std::future::pending::<()>().await;
        }
        let asked = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.uid, c.name))
            .collect();
        let claims: HashMap<_, _> = self
            .prepare("v1", asked)
            .into_iter()
            .map(|(uid, name)| {
                let device = v1::Device {
                    request_names: vec!["gpu".into()],
                    pool_name: "node-a".into(),
                    device_name: format!("dev-{name}"),
                    cdi_device_ids: vec![cdi_id(&self.spec.name, &name)],
                    share_id: Some(format!("share-{uid}")),
                };
                let entry = v1::NodePrepareResourceResponse {
                    devices: vec![device],
                    error: String::new(),
                };
                (uid, entry)
            })
            .collect();
        Ok(Response::new(v1::NodePrepareResourcesResponse { claims }))
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<v1::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<v1::NodeUnprepareResourcesResponse>, Status> {
        self.note_deadline(&request);
        let asked = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.uid, c.name))
            .collect();
        let claims = self
            .unprepare("v1", asked)
            .into_iter()
            .map(|uid| (uid, v1::NodeUnprepareResourceResponse::default()))
            .collect();
        Ok(Response::new(v1::NodeUnprepareResourcesResponse { claims }))
    }
}

#[tonic::async_trait]
impl v1beta1::dra_plugin_server::DraPlugin for DriverService {
    async fn node_prepare_resources(
        &self,
        request: Request<v1beta1::NodePrepareResourcesRequest>,
    ) -> Result<Response<v1beta1::NodePrepareResourcesResponse>, Status> {
        self.note_deadline(&request);
        let asked = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.uid, c.name))
            .collect();
        let claims: HashMap<_, _> = self
            .prepare("v1beta1", asked)
            .into_iter()
            .map(|(uid, name)| {
                let device = v1beta1::Device {
                    request_names: vec!["gpu".into()],
                    pool_name: "node-a".into(),
                    device_name: format!("dev-{name}"),
                    cdi_device_ids: vec![cdi_id(&self.spec.name, &name)],
                };
                let entry = v1beta1::NodePrepareResourceResponse {
                    devices: vec![device],
                    error: String::new(),
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
        let asked = request
            .into_inner()
            .claims
            .into_iter()
            .map(|c| (c.uid, c.name))
            .collect();
        let claims = self
            .unprepare("v1beta1", asked)
            .into_iter()
            .map(|uid| (uid, v1beta1::NodeUnprepareResourceResponse::default()))
            .collect();
        Ok(Response::new(v1beta1::NodeUnprepareResourcesResponse {
            claims,
        }))
    }
}

type V1Stream =
    Pin<Box<dyn Stream<Item = Result<dra_health::v1::NodeWatchResourcesResponse, Status>> + Send>>;
type V1alpha1Stream = Pin<
    Box<dyn Stream<Item = Result<dra_health::v1alpha1::NodeWatchResourcesResponse, Status>> + Send>,
>;

#[tonic::async_trait]
impl dra_health::v1::dra_resource_health_server::DraResourceHealth for DriverService {
    type NodeWatchResourcesStream = V1Stream;

    async fn node_watch_resources(
        &self,
        _request: Request<dra_health::v1::NodeWatchResourcesRequest>,
    ) -> Result<Response<V1Stream>, Status> {
        use dra_health::v1::{DeviceHealth, DeviceIdentifier, NodeWatchResourcesResponse};
        let lists = self.health_stream("v1")?;
        Ok(Response::new(Box::pin(lists.map(|list| {
            Ok(NodeWatchResourcesResponse {
                devices: list
                    .into_iter()
                    .map(|(pool_name, device_name, health, message)| DeviceHealth {
                        device: Some(DeviceIdentifier {
                            pool_name,
                            device_name,
                        }),
                        health,
                        last_updated_time: 1_700_000_000,
                        health_check_timeout_seconds: 60,
                        message,
                    })
                    .collect(),
            })
        }))))
    }
}

#[tonic::async_trait]
impl dra_health::v1alpha1::dra_resource_health_server::DraResourceHealth for DriverService {
    type NodeWatchResourcesStream = V1alpha1Stream;

    async fn node_watch_resources(
        &self,
        _request: Request<dra_health::v1alpha1::NodeWatchResourcesRequest>,
    ) -> Result<Response<V1alpha1Stream>, Status> {
        use dra_health::v1alpha1::{DeviceHealth, DeviceIdentifier, NodeWatchResourcesResponse};
        let lists = self.health_stream("v1alpha1")?;
        Ok(Response::new(Box::pin(lists.map(|list| {
            Ok(NodeWatchResourcesResponse {
                devices: list
                    .into_iter()
                    .map(|(pool_name, device_name, health, message)| DeviceHealth {
                        device: Some(DeviceIdentifier {
                            pool_name,
                            device_name,
                        }),
                        health,
                        last_updated_time: 1_700_000_000,
                        health_check_timeout_seconds: 60,
                        message,
                    })
                    .collect(),
            })
        }))))
    }
}
