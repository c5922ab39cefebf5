//! The device-plugin side of the plugin-watcher stand-in, on the folder
//! watch it shares with the DRA stand-in, against a small tonic device
//! plugin: registration, admission, deregistration when the socket goes,
//! refusal, a restart that deletes the socket, and a DRA socket in the
//! same folder refused as a plugin type it does not handle.

use std::path::Path;
use std::pin::Pin;

use crate::support::WAIT;
use crate::support::registration_socket::RegistrationSocket;
use tempfile::TempDir;
use tokio::net::UnixListener;
use tokio_stream::Stream;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use wdp_kubelet_api::pluginregistration::{DEVICE_PLUGIN_TYPE, DRA_PLUGIN_TYPE, PluginInfo};
use wdp_kubelet_api::v1beta1::{
    self, AllocateRequest, AllocateResponse, ContainerAllocateResponse, Device,
    DevicePluginOptions, Empty, ListAndWatchResponse, PreStartContainerRequest,
    PreStartContainerResponse, PreferredAllocationRequest, PreferredAllocationResponse,
    device_plugin_server::{DevicePlugin, DevicePluginServer},
};
use wdp_kubelet_sim::SimPluginWatcher;

const RESOURCE: &str = "example.com/widget";

#[derive(Clone)]
struct Widgets;

type Lists = Pin<Box<dyn Stream<Item = Result<ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Widgets {
    async fn get_device_plugin_options(
        &self,
        _: Request<Empty>,
    ) -> Result<Response<DevicePluginOptions>, Status> {
        Ok(Response::new(DevicePluginOptions::default()))
    }

    type ListAndWatchStream = Lists;

    async fn list_and_watch(&self, _: Request<Empty>) -> Result<Response<Lists>, Status> {
        let devices = (0..2)
            .map(|i| Device {
                id: format!("widget-{i}"),
                health: v1beta1::HEALTHY.to_owned(),
                topology: None,
            })
            .collect();
        let first = tokio_stream::once(Ok(ListAndWatchResponse { devices }));
        // One list, then the stream stays open as a plugin's does.
        Ok(Response::new(Box::pin(tokio_stream::StreamExt::chain(
            first,
            tokio_stream::pending(),
        ))))
    }

    async fn get_preferred_allocation(
        &self,
        _: Request<PreferredAllocationRequest>,
    ) -> Result<Response<PreferredAllocationResponse>, Status> {
        Err(Status::unimplemented("not offered"))
    }

    async fn allocate(
        &self,
        request: Request<AllocateRequest>,
    ) -> Result<Response<AllocateResponse>, Status> {
        let container_responses = request
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| ContainerAllocateResponse {
                envs: [("WIDGETS".to_owned(), c.devices_ids.join(","))].into(),
                ..Default::default()
            })
            .collect();
        Ok(Response::new(AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        _: Request<PreStartContainerRequest>,
    ) -> Result<Response<PreStartContainerResponse>, Status> {
        Ok(Response::new(PreStartContainerResponse {}))
    }
}

struct DevicePluginWorld {
    tmp: TempDir,
    stop: CancellationToken,
}

impl Drop for DevicePluginWorld {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl DevicePluginWorld {
    /// Serves the device plugin's endpoint.
    fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("wdp-watcher-sim-")
            .tempdir()
            .unwrap();
        std::fs::create_dir_all(tmp.path().join("registry")).unwrap();
        let listener = UnixListener::bind(tmp.path().join("widget.sock")).unwrap();
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(DevicePluginServer::new(Widgets))
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), token.cancelled())
                .await
                .unwrap();
        });
        Self { tmp, stop }
    }

    fn registry(&self) -> std::path::PathBuf {
        self.tmp.path().join("registry")
    }

    fn registration_path(&self) -> std::path::PathBuf {
        self.registry().join("widget-reg.sock")
    }

    fn serve_registration(&self, kind: &str) -> RegistrationSocket {
        let endpoint = self.tmp.path().join("widget.sock");
        RegistrationSocket::serve(
            &self.registration_path(),
            PluginInfo {
                r#type: kind.to_owned(),
                name: RESOURCE.to_owned(),
                endpoint: endpoint.to_string_lossy().into_owned(),
                supported_versions: vec![v1beta1::VERSION.to_owned()],
            },
        )
    }
}

#[tokio::test]
async fn a_device_plugin_registers_is_admitted_and_goes_with_its_socket() {
    let world = DevicePluginWorld::new();
    let mut registration = world.serve_registration(DEVICE_PLUGIN_TYPE);
    let watcher = SimPluginWatcher::start(world.registry()).await.unwrap();
    let plugin = watcher.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    assert_eq!(plugin.socket, world.registration_path());
    assert_eq!(plugin.devices.len(), 2);
    assert!(registration.status(0, WAIT).await.plugin_registered);

    let (ids, response) = watcher.admit(RESOURCE, 2).await.unwrap();
    assert_eq!(ids, ["widget-0", "widget-1"]);
    assert_eq!(response.envs["WIDGETS"], "widget-0,widget-1");

    std::fs::remove_file(world.registration_path()).unwrap();
    watcher
        .wait_for("the plugin to go", WAIT, |s| s.plugins.is_empty())
        .await
        .unwrap();
    assert_eq!(watcher.state().registrations[RESOURCE], 1);
}

#[tokio::test]
async fn a_restart_deletes_the_socket_and_a_new_one_registers_again() {
    let world = DevicePluginWorld::new();
    let _first = world.serve_registration(DEVICE_PLUGIN_TYPE);
    let mut watcher = SimPluginWatcher::start(world.registry()).await.unwrap();
    watcher.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    // A file that is not a socket, and a hidden socket, are left alone.
    std::fs::write(world.registry().join("notes.txt"), "x").unwrap();

    watcher.restart().await.unwrap();
    assert!(!world.registration_path().exists());
    assert!(world.registry().join("notes.txt").exists());
    assert!(watcher.state().plugins.is_empty());

    let mut second = world.serve_registration(DEVICE_PLUGIN_TYPE);
    let plugin = watcher.wait_registered(RESOURCE, 1, WAIT).await.unwrap();
    assert_eq!(plugin.registrations, 1, "counted since the restart");
    assert!(second.status(0, WAIT).await.plugin_registered);
}

#[tokio::test]
async fn refusals_and_foreign_plugin_types_are_told_to_the_plugin() {
    let world = DevicePluginWorld::new();
    let watcher = SimPluginWatcher::start(world.registry()).await.unwrap();
    watcher.refuse(Some("maintenance"));
    let mut refused = world.serve_registration(DEVICE_PLUGIN_TYPE);
    let status = refused.status(0, WAIT).await;
    assert!(!status.plugin_registered);
    assert_eq!(status.error, "maintenance");

    watcher.refuse(None);
    drop(refused);
    std::fs::remove_file(world.registration_path()).unwrap();
    let mut foreign = world.serve_registration(DRA_PLUGIN_TYPE);
    let status = foreign.status(0, WAIT).await;
    assert!(!status.plugin_registered);
    assert!(
        status
            .error
            .contains("no handler registered for plugin type"),
        "{}",
        status.error
    );
    assert!(watcher.state().plugins.is_empty());
    assert!(Path::new(&foreign.path).exists());
}
