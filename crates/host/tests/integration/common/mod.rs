//! A host started in-process against the simulated kubelet, on a scratch
//! copy of a fixture tree.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};
use wdp_kubelet_api::v1beta1::{AllocateRequest, ContainerAllocateRequest};
use wdp_kubelet_sim::SimKubelet;
use wdp_test_support::eventually;
use wdp_test_support::fixtures::{copy_fixture, under_root, write_under_root};

pub mod dra_world;

/// Generous bound for events that normally take milliseconds.
pub const WAIT: Duration = Duration::from_secs(20);

/// An `Allocate` request for one container asking for device `id`.
pub fn allocate_one(id: &str) -> AllocateRequest {
    AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: vec![id.to_owned()],
        }],
    }
}

/// A world of `nodes` plain device nodes `/dev/acc0…` (no NUMA node in
/// the root) and one resource `resource` of them with `hooks` appended;
/// polls a minute apart.
pub fn nodes_world(resource: &str, nodes: usize, hooks: &str) -> World {
    let world = World::new(None);
    for i in 0..nodes {
        world.write_host(&format!("/dev/acc{i}"), "");
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "acc.toml",
        &format!(
            "version = 1\nresource = \"{resource}\"\n[[nodes]]\npath = \"/dev/acc*\"\n{hooks}"
        ),
    );
    world
}

/// A scratch world: host root, config dir and device-plugin folder.
pub struct World {
    pub tmp: TempDir,
}

impl World {
    /// An empty world, or one whose root is a copy of `tests/fixtures/<name>`.
    pub fn new(fixture: Option<&str>) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("wdp-host-")
            .tempdir()
            .unwrap();
        for d in ["root/dev", "config/guests", "plugins"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        if let Some(fixture) = fixture {
            copy_fixture(fixture, &tmp.path().join("root"));
        }
        Self { tmp }
    }

    pub fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub fn config(&self) -> PathBuf {
        self.tmp.path().join("config")
    }

    pub fn plugins(&self) -> PathBuf {
        self.tmp.path().join("plugins")
    }

    /// Writes `text` at host path `path` under the root (parents created).
    pub fn write_host(&self, path: &str, text: &str) {
        write_under_root(&self.root(), path, text);
    }

    /// Copies a built guest into `config/guests/<name>`.
    pub fn install_guest(&self, built: &str, name: &str) {
        std::fs::copy(built, self.config().join("guests").join(name)).unwrap();
    }

    pub fn write_config(&self, name: &str, text: &str) {
        std::fs::write(self.config().join(name), text).unwrap();
    }

    pub fn options(&self) -> HostOptions {
        HostOptions {
            config_dir: self.config(),
            device_plugin_dir: self.plugins(),
            host_root: self.root(),
            cdi_dir: self.tmp.path().join("cdi"),
            registration: wdp_kubelet_socket::RegistrationMode::Kubelet,
            plugins_registry_dir: self.tmp.path().join("plugins_registry"),
            plugins_dir: self.tmp.path().join("plugins"),
            state_dir: self.tmp.path().join("state"),
            kubeconfig: None,
            node_name: "node-a".to_owned(),
            instance_id: None,
            pod_resources_socket: self.tmp.path().join("pod-resources/kubelet.sock"),
            serve_last_good: true,
        }
    }

    pub async fn kubelet(&self) -> SimKubelet {
        SimKubelet::start(self.plugins()).await.unwrap()
    }

    pub async fn start(&self) -> Arc<Host> {
        Host::start(self.options(), Metrics::new()).await.unwrap()
    }
}

/// The value of the sample `name{labels…}` in a text exposition (0 when
/// absent); `labels` must all match.
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| {
            series.split('{').next() == Some(name)
                && labels
                    .iter()
                    .all(|(k, v)| series.contains(&format!("{k}=\"{v}\"")))
        })
        .map(|(_, value)| value.parse::<f64>().unwrap())
        .sum()
}

/// Waits until `condition` holds for the host's metrics.
pub async fn wait_metrics(host: &Host, what: &str, condition: impl Fn(&str) -> bool) {
    eventually(WAIT, Duration::from_millis(10), async || {
        let text = host.metrics().encode();
        if condition(&text) {
            Ok(())
        } else {
            Err(format!("waiting for {what}; metrics:\n{text}"))
        }
    })
    .await
}

/// Whether `path` exists under the root.
pub fn exists(root: &Path, path: &str) -> bool {
    under_root(root, path).exists()
}
