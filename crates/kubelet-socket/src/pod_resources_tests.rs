//! Tests of `pod_resources` against the kubelet stand-in's PodResources
//! server: what it lists, and each way it can fail, named.

use std::time::Duration;

use wdp_kubelet_sim::{PodResourcesFault, SimKubelet};

use super::*;

async fn kubelet(dir: &Path) -> SimKubelet {
    SimKubelet::start(dir.join("device-plugins")).await.unwrap()
}

#[tokio::test]
async fn lists_the_devices_pods_hold_of_one_resource() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("device-plugins")).unwrap();
    let kubelet = kubelet(tmp.path()).await;
    let socket = tmp.path().join("pod-resources/kubelet.sock");
    let _server = kubelet.serve_pod_resources(&socket).unwrap();
    kubelet.add_pod("example.com/gpu", &["gpu0", "gpu1"]);
    let other = kubelet.add_pod("example.com/nic", &["nic0"]);
    let gone = kubelet.add_pod("example.com/gpu", &["gpu3"]);
    assert!(kubelet.end_pod(&gone));
    let reader = PodResourcesReader::new(&socket);
    let held = reader
        .device_plugin_holdings("example.com/gpu")
        .await
        .unwrap();
    assert_eq!(held, BTreeSet::from(["gpu0".to_owned(), "gpu1".to_owned()]));
    assert!(kubelet.end_pod(&other));
    assert!(
        reader
            .device_plugin_holdings("example.com/nic")
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn each_failure_names_the_socket_and_what_went_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("device-plugins")).unwrap();
    let kubelet = kubelet(tmp.path()).await;
    let socket = tmp.path().join("pod-resources/kubelet.sock");
    let reader = PodResourcesReader::new(&socket).with_timeout(Duration::from_millis(300));

    let missing = reader.device_plugin_holdings("example.com/gpu").await;
    let error = missing.unwrap_err();
    assert!(
        matches!(error, PodResourcesError::Connect { .. }),
        "{error}"
    );
    assert!(
        error.to_string().contains("pod-resources/kubelet.sock"),
        "{error}"
    );

    let server = kubelet.serve_pod_resources(&socket).unwrap();
    server.set_fault(PodResourcesFault::Garbage);
    let error = reader
        .device_plugin_holdings("example.com/gpu")
        .await
        .unwrap_err();
    assert!(matches!(error, PodResourcesError::Call { .. }), "{error}");
    assert!(error.to_string().contains("decode"), "{error}");

    server.set_fault(PodResourcesFault::Slow(Duration::from_secs(5)));
    let error = reader
        .device_plugin_holdings("example.com/gpu")
        .await
        .unwrap_err();
    assert!(
        matches!(error, PodResourcesError::Timeout { .. }),
        "{error}"
    );
}

#[tokio::test]
async fn the_kubelet_rate_limit_refuses_a_burst_past_ten() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("device-plugins")).unwrap();
    let kubelet = kubelet(tmp.path()).await;
    let socket = tmp.path().join("pod-resources/kubelet.sock");
    let _server = kubelet.serve_pod_resources(&socket).unwrap();
    // A burst of 100 calls at once: the bucket holds 10, refills 100 a
    // second.
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let reader = PodResourcesReader::new(&socket);
        calls.spawn(async move { reader.device_plugin_holdings("example.com/gpu").await });
    }
    let results = calls.join_all().await;
    let limited = results
        .iter()
        .filter(|r| {
            matches!(r, Err(PodResourcesError::Call { status, .. })
                if status.code() == tonic::Code::ResourceExhausted)
        })
        .count();
    assert!(limited > 0, "{results:?}");
    assert!(results.iter().filter(|r| r.is_ok()).count() >= 10);
}
