//! Shared helpers of the integration tests: a started server with a real kube client built
//! from the kubeconfig it writes, and ResourceSlice builders.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::config::{KubeConfigOptions, Kubeconfig};
use wdp_fake_apiserver::FakeApiServer;

/// A running fake and a kube client configured through its kubeconfig file.
pub struct Harness {
    pub server: FakeApiServer,
    pub client: kube::Client,
    pub dir: tempfile::TempDir,
}

/// Starts a server and connects a client the way a driver would: from a kubeconfig file.
pub async fn start() -> Harness {
    let server = FakeApiServer::start()
        .await
        .expect("start the fake API server");
    let dir = tempfile::tempdir().expect("temp dir");
    let client = client_of(&server, &dir, true).await;
    Harness {
        server,
        client,
        dir,
    }
}

/// A client of `server` built from a kubeconfig written into `dir`. kube's default client
/// retries 429/503/504 answers up to 15 times with growing delays (minutes in all);
/// `retry: false` turns that off.
pub async fn client_of(
    server: &FakeApiServer,
    dir: &tempfile::TempDir,
    retry: bool,
) -> kube::Client {
    let path = dir.path().join("kubeconfig");
    server.write_kubeconfig(&path).expect("write kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig is usable");
    config.default_retry = retry;
    // kube is built with ring; a workspace build also links aws-lc-rs (the
    // tests' CDI schema crate), and then rustls cannot choose by itself.
    let _ = rustls::crypto::ring::default_provider().install_default();
    kube::Client::try_from(config).expect("client")
}

/// A valid slice `name` of `driver` on `node` with devices named `devices`.
pub fn slice(name: &str, node: &str, driver: &str, devices: &[&str]) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: driver.into(),
            node_name: Some(node.into()),
            pool: ResourcePool {
                name: node.into(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices.iter().map(|d| device(d)).collect()),
            ..Default::default()
        },
    }
}

/// A device with one string attribute.
pub fn device(name: &str) -> Device {
    Device {
        name: name.into(),
        attributes: Some(BTreeMap::from([(
            "model".to_string(),
            DeviceAttribute {
                string: Some("fake".into()),
                ..Default::default()
            },
        )])),
        ..Default::default()
    }
}

/// The API error inside a kube error, or a panic naming what came instead.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Asserts that `result` is a 422 `Invalid` naming `path` in the message and in a cause, with
/// `words` in the message.
pub fn assert_invalid<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    path: &str,
    words: &str,
    what: &str,
) {
    let status = api_error(result);
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{what}: {}",
        status.message
    );
    assert!(
        status.message.contains(&format!("{path}: ")),
        "{what}: {path} not named in {:?}",
        status.message
    );
    assert!(
        status.message.contains(words),
        "{what}: {words:?} not in {:?}",
        status.message
    );
    let causes = status.details.expect("details").causes;
    assert!(
        causes.iter().any(|c| c.field == path),
        "{what}: no cause for {path}: {causes:?}"
    );
}

/// A counter map `name → value` for counter sets and consumptions.
pub fn counters(
    names: impl IntoIterator<Item = String>,
    value: &str,
) -> BTreeMap<String, k8s_openapi::api::resource::v1::Counter> {
    names
        .into_iter()
        .map(|name| {
            (
                name,
                k8s_openapi::api::resource::v1::Counter {
                    value: k8s_openapi::apimachinery::pkg::api::resource::Quantity(value.into()),
                },
            )
        })
        .collect()
}

/// `prefix0`, `prefix1`, … `prefix{n-1}`.
pub fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}
