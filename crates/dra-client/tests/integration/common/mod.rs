//! Shared helpers of the integration tests: a fake API server with a real kube
//! client built from a kubeconfig file, device lists, and awaiting states.

#![allow(dead_code)] // each test file uses a different part

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_dra_client::{
    AttributeValue, DeviceTaint, DraDevice, PoolTarget, PublishStatus, PublisherHandle,
    SlicePublisher, TaintEffect,
};
use wdp_fake_apiserver::{FakeApiServer, ResourceSlice};

pub const DRIVER: &str = "gpu.example.com";
pub const NODE: &str = "node-1";
/// Long enough for a loaded 2-core machine; every wait ends at its event.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A fake API server and a client for it, made by `wdp_dra_client::client`
/// from a kubeconfig file.
pub struct Cluster {
    pub server: FakeApiServer,
    pub client: kube::Client,
    _kubeconfig_dir: tempfile::TempDir,
}

impl Cluster {
    pub async fn start() -> Self {
        let server = FakeApiServer::start()
            .await
            .expect("the fake API server starts");
        let kubeconfig_dir = tempfile::tempdir().expect("a temporary folder");
        let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
        server
            .write_kubeconfig(&kubeconfig)
            .expect("the kubeconfig is written");
        let client = wdp_dra_client::client(Some(&kubeconfig))
            .await
            .expect("a client from the kubeconfig");
        Self {
            server,
            client,
            _kubeconfig_dir: kubeconfig_dir,
        }
    }

    pub fn publisher(&self, target: PoolTarget) -> PublisherHandle {
        SlicePublisher::spawn(self.client.clone(), target, CancellationToken::new())
    }

    /// The slices of DRIVER on NODE.
    pub fn our_slices(&self) -> Vec<ResourceSlice> {
        self.server.slices_of(NODE, DRIVER)
    }

    pub fn writes(&self) -> u64 {
        let stats = self.server.stats();
        stats.slice_creates
            + stats.slice_updates
            + stats.slice_deletes
            + stats.slice_collection_deletes
    }
}

pub fn target() -> PoolTarget {
    PoolTarget::new(DRIVER, NODE)
}

/// `count` GPUs with a model and an index attribute each.
pub fn gpus(count: usize) -> Vec<DraDevice> {
    (0..count)
        .map(|index| {
            DraDevice::new(format!("gpu{index}"))
                .with_attribute("model", AttributeValue::String("A100".into()))
                .with_attribute("index", AttributeValue::Int(index as i64))
        })
        .collect()
}

pub fn unhealthy_taint() -> DeviceTaint {
    DeviceTaint {
        key: "gpu.example.com/unhealthy".into(),
        value: "xid-79".into(),
        effect: TaintEffect::NoSchedule,
    }
}

/// Waits until the publisher's status satisfies `predicate`; panics with the
/// last status when it does not within PATIENCE.
pub async fn status_where(
    status: &mut watch::Receiver<PublishStatus>,
    what: &str,
    predicate: impl FnMut(&PublishStatus) -> bool,
) -> PublishStatus {
    let outcome = tokio::time::timeout(PATIENCE, status.wait_for(predicate))
        .await
        .map(|waited| waited.map(|found| found.clone()));
    match outcome {
        Ok(Ok(found)) => found,
        Ok(Err(_)) => panic!("the publisher ended while waiting for {what}"),
        Err(_) => panic!(
            "no {what} within {PATIENCE:?}; last status: {:?}",
            *status.borrow()
        ),
    }
}

/// Waits until the server's slices of DRIVER on NODE satisfy `predicate`.
pub async fn slices_where(
    server: &FakeApiServer,
    what: &str,
    predicate: impl Fn(&[ResourceSlice]) -> bool,
) -> Vec<ResourceSlice> {
    let ours = |all: &[ResourceSlice]| {
        let ours: Vec<ResourceSlice> = all
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(NODE) && s.spec.driver == DRIVER)
            .cloned()
            .collect();
        predicate(&ours)
    };
    match server.wait_for_slices(ours, PATIENCE).await {
        Ok(_) => server.slices_of(NODE, DRIVER),
        Err(timeout) => panic!(
            "no {what}: {timeout}; slices: {:#?}",
            server.slices_of(NODE, DRIVER)
        ),
    }
}

/// The device names in `slices`, sorted.
pub fn device_names(slices: &[ResourceSlice]) -> Vec<String> {
    let mut names: Vec<String> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| d.name.clone())
        .collect();
    names.sort();
    names
}

/// The names `gpus(count)` gets, sorted.
pub fn gpu_names(count: usize) -> Vec<String> {
    let mut names: Vec<String> = (0..count).map(|i| format!("gpu{i}")).collect();
    names.sort();
    names
}

/// Whether every slice is of one complete pool at `generation`.
pub fn complete_pool_at(slices: &[ResourceSlice], generation: i64) -> bool {
    !slices.is_empty()
        && slices.iter().all(|s| {
            s.spec.pool.generation == generation
                && s.spec.pool.resource_slice_count == slices.len() as i64
                && s.spec.pool.name == NODE
        })
}

/// Runs `future` with a deadline, panicking with `what` when it passes.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {PATIENCE:?}"))
}
