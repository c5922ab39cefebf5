//! A DRA resource served in-process against the fake API server, with the
//! kubelet's side played by plain gRPC clients over the sockets: the world
//! the DRA tests share and their helpers.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;
use wdp_fake_apiserver::FakeApiServer;
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};
use wdp_kubelet_api::dra::v1 as dra;
use wdp_kubelet_api::pluginregistration::{
    InfoRequest, RegistrationStatus, registration_client::RegistrationClient,
};

use super::{WAIT, World};
/// Checks a CDI spec the way container runtimes' CDI library does.
pub use wdp_test_support::read_cdi_spec;

pub const DRIVER: &str = "gpu.example.com";
pub const NODE: &str = "node-a";
/// Two of the fixture's GPUs, by PCI address.
pub const GPU_A: &str = "0000:03:00.0";
pub const GPU_B: &str = "0000:04:00.0";

pub struct DraWorld {
    pub world: World,
    pub api: FakeApiServer,
}

impl DraWorld {
    /// The 8-GPU fixture served as DRA driver `gpu.example.com`, `extra`
    /// appended to the resource file.
    pub async fn new(extra: &str) -> Self {
        let world = World::new(Some("gpu-server"));
        world.write_config(
            "host.toml",
            "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
        );
        world.write_config(
            "gpu.toml",
            &format!(
                "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n{extra}"
            ),
        );
        std::fs::create_dir_all(world.tmp.path().join("plugins_registry")).unwrap();
        let api = FakeApiServer::start().await.unwrap();
        api.write_kubeconfig(&world.tmp.path().join("kubeconfig"))
            .unwrap();
        Self { world, api }
    }

    pub fn options(&self) -> HostOptions {
        HostOptions {
            kubeconfig: Some(self.world.tmp.path().join("kubeconfig")),
            node_name: NODE.to_owned(),
            instance_id: None,
            ..self.world.options()
        }
    }

    pub async fn start(&self) -> Arc<Host> {
        Host::start(self.options(), Metrics::new()).await.unwrap()
    }

    /// Starts the host, registers the driver as the plugin watcher does and
    /// waits for the fixture's 8 GPUs to be published; returns the host and
    /// the driver's endpoint.
    pub async fn serving(&self) -> (Arc<Host>, String) {
        self.serving_count(8).await
    }

    /// As [`Self::serving`], waiting for `count` published devices.
    pub async fn serving_count(&self, count: usize) -> (Arc<Host>, String) {
        let host = self.start().await;
        wait_for_socket(&self.registration_socket()).await;
        let (endpoint, _) = self.register().await;
        self.wait_published(count).await;
        (host, endpoint)
    }

    pub fn registration_socket(&self) -> PathBuf {
        self.world
            .tmp
            .path()
            .join("plugins_registry")
            .join(format!("{DRIVER}-reg.sock"))
    }

    pub fn cdi_dir(&self) -> PathBuf {
        self.world.tmp.path().join("cdi")
    }

    /// Waits for the driver's slices to list `count` devices.
    pub async fn wait_published(&self, count: usize) {
        self.api
            .wait_for_slices(
                |slices| {
                    slices
                        .iter()
                        .filter(|s| s.spec.driver == DRIVER)
                        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                        .sum::<usize>()
                        == count
                },
                WAIT,
            )
            .await
            .unwrap();
    }

    /// Plays the plugin watcher: GetInfo, then NotifyRegistrationStatus ok;
    /// returns the endpoint.
    pub async fn register(&self) -> (String, Vec<String>) {
        let channel = wdp_kubelet_api::connect_unix(self.registration_socket())
            .await
            .unwrap();
        let mut client = RegistrationClient::new(channel);
        let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();
        assert_eq!(info.r#type, "DRAPlugin");
        assert_eq!(info.name, DRIVER);
        client
            .notify_registration_status(RegistrationStatus {
                plugin_registered: true,
                error: String::new(),
            })
            .await
            .unwrap();
        (info.endpoint, info.supported_versions)
    }
}

pub async fn wait_for_socket(path: &Path) {
    tokio::time::timeout(WAIT, async {
        while !path.exists() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{} never appeared", path.display()));
}

pub async fn dra_client(
    endpoint: &str,
) -> dra::dra_plugin_client::DraPluginClient<tonic::transport::Channel> {
    dra::dra_plugin_client::DraPluginClient::new(
        wdp_kubelet_api::connect_unix(endpoint).await.unwrap(),
    )
}

/// A claim allocated `devices` (DRA device names) of `driver` in pool `NODE`.
pub fn claim(name: &str, driver: &str, devices: &[&str]) -> ResourceClaim {
    let results: Vec<serde_json::Value> = devices
        .iter()
        .map(|device| {
            serde_json::json!({
                "request": "gpus", "driver": driver, "pool": NODE, "device": device
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": results}}}
    }))
    .unwrap()
}

pub fn unallocated(name: &str) -> ResourceClaim {
    let mut claim = claim(name, DRIVER, &[]);
    claim.status = None;
    claim
}

pub fn claim_ref(claim: &ResourceClaim) -> dra::Claim {
    dra::Claim {
        namespace: claim.metadata.namespace.clone().unwrap(),
        uid: claim.metadata.uid.clone().unwrap(),
        name: claim.metadata.name.clone().unwrap(),
    }
}

pub fn name_of(id: &str) -> String {
    wdp_k8s_naming::device_name(id).unwrap()
}

pub fn cdi_specs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default()
}

pub fn uid(claim: &ResourceClaim) -> String {
    claim.metadata.uid.clone().unwrap()
}

pub async fn prepare_one(
    endpoint: &str,
    claim: &ResourceClaim,
) -> dra::NodePrepareResourceResponse {
    let mut answer = dra_client(endpoint)
        .await
        .node_prepare_resources(dra::NodePrepareResourcesRequest {
            claims: vec![claim_ref(claim)],
        })
        .await
        .unwrap()
        .into_inner();
    answer.claims.remove(&uid(claim)).unwrap()
}

pub async fn unprepare_one(endpoint: &str, claim: &ResourceClaim) -> String {
    let mut answer = dra_client(endpoint)
        .await
        .node_unprepare_resources(dra::NodeUnprepareResourcesRequest {
            claims: vec![claim_ref(claim)],
        })
        .await
        .unwrap()
        .into_inner();
    answer.claims.remove(&uid(claim)).unwrap().error
}

pub fn spec_of(w: &DraWorld, claim: &ResourceClaim) -> PathBuf {
    w.cdi_dir()
        .join(format!("wdp-example.com-gpu_{}.json", uid(claim)))
}
