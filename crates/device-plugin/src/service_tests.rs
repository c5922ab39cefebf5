//! Tests of `service`: what the kubelet is shown before a refusal.

use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use prometheus_client::registry::Registry;
use wdp_kubelet_api::v1beta1::{ContainerAllocateRequest, HEALTHY, UNHEALTHY};
use wdp_kubelet_socket::KubeletMetrics;

use super::*;

/// A resource over device nodes `/dev/acc0` and `/dev/acc1` of a scratch
/// root, scanned.
fn two_nodes() -> (tempfile::TempDir, Arc<Resource>) {
    let tmp = tempfile::tempdir().unwrap();
    let (root, config) = (tmp.path().join("root"), tmp.path().join("config"));
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    for i in 0..2 {
        std::fs::write(root.join(format!("dev/acc{i}")), b"").unwrap();
    }
    std::fs::write(
        config.join("acc.toml"),
        "version = 1\nresource = \"example.com/acc\"\n[[nodes]]\npath = \"/dev/acc*\"\n",
    )
    .unwrap();
    let config = wdp_config::load_dir(&config).unwrap();
    let engine = wdp_resource::new_engine(&config).unwrap();
    let spec = wdp_resource::load_specs(&engine, &config)
        .unwrap()
        .into_values()
        .next()
        .unwrap();
    let resource = Resource::unscanned(
        spec,
        wdp_hardware::HostRoot::new(&root),
        wdp_resource::ResourceMetrics::unregistered(),
        None,
    );
    resource.first_scan().unwrap();
    (tmp, resource)
}

fn metrics() -> Arc<DevicePluginMetrics> {
    let mut registry = Registry::default();
    let kubelet = KubeletMetrics::register(&mut registry, wdp_resource::latency_histogram);
    DevicePluginMetrics::register(&mut registry, kubelet)
}

/// The health the kubelet holds for `id` in its latest list.
fn health(lists: &Mutex<Vec<ListAndWatchResponse>>, id: &str) -> String {
    let lists = lists.lock().unwrap();
    let latest = lists.last().expect("a list");
    let device = latest.devices.iter().find(|d| d.id == id).expect("listed");
    device.health.clone()
}

#[tokio::test]
async fn the_kubelet_hears_a_device_is_unhealthy_no_later_than_its_refusal() {
    let (tmp, resource) = two_nodes();
    let service = DevicePluginService::new(resource.clone(), metrics(), CancellationToken::new());
    let mut stream = service
        .list_and_watch(Request::new(Empty {}))
        .await
        .unwrap()
        .into_inner();
    // The kubelet: every list it is handed, in order.
    let lists = Arc::new(Mutex::new(Vec::new()));
    let kubelet = lists.clone();
    tokio::spawn(async move {
        while let Some(Ok(list)) = stream.next().await {
            kubelet.lock().unwrap().push(list);
        }
    });
    while lists.lock().unwrap().is_empty() {
        tokio::task::yield_now().await;
    }
    assert_eq!(health(&lists, "acc1"), HEALTHY);

    // The hardware goes; the refresh publishes it unhealthy, and an
    // Allocate arrives before the stream has run.
    std::fs::remove_file(tmp.path().join("root/dev/acc1")).unwrap();
    assert!(resource.refresh());
    let refused = service
        .allocate(Request::new(AllocateRequest {
            container_requests: vec![ContainerAllocateRequest {
                devices_ids: vec!["acc1".to_owned()],
            }],
        }))
        .await
        .unwrap_err();
    assert!(refused.message().contains("unhealthy"), "{refused:?}");
    assert_eq!(
        health(&lists, "acc1"),
        UNHEALTHY,
        "refused before the kubelet was told"
    );
}
