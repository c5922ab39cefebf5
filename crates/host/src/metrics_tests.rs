//! Tests of `metrics`: every layer's families in the one registry, each
//! once, in registration order.

use std::time::Duration;

use super::*;

#[test]
fn every_family_is_exposed_once_with_its_type() {
    // A family shows in the exposition once it has a series: one each.
    let metrics = Metrics::new();
    let resource = "example.com/gpu";
    let driver = "gpu.example.com";
    metrics.resource.set_devices(resource, 1, 0);
    metrics.resource.allocated(resource, 1);
    metrics
        .resource
        .observe_guest(resource, "g.wasm", "health", "ok", Duration::ZERO);
    let _ = metrics
        .resource
        .guest_calls_in_flight
        .get_or_create(&wdp_resource::GuestLabels {
            resource: resource.to_owned(),
            guest: "g.wasm".to_owned(),
            hook: "health".to_owned(),
        });
    metrics.resource.set_withheld(resource, 1);
    metrics
        .kubelet
        .observe_rpc(resource, "Allocate", "Ok", Duration::ZERO);
    metrics.kubelet.registration(resource, true);
    metrics.host.reload(true);
    metrics.host.set_config_set("default", "sha256:0");
    let _ = metrics
        .device_plugin
        .streams
        .get_or_create(&wdp_resource::ResourceLabel {
            resource: resource.to_owned(),
        });
    metrics.dra.set_driver(resource, driver);
    metrics.dra.set_published(driver, 1, 1);
    metrics.dra.observe_passthrough(
        driver,
        "bind",
        wdp_dra_driver::metrics::PassthroughOutcome::Success,
        Duration::ZERO,
    );
    let text = metrics.encode();
    let types: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE wasm_device_plugin_"))
        .collect();
    assert_eq!(
        types,
        [
            "devices gauge",
            "allocated_devices counter",
            "guest_calls counter",
            "guest_call_duration_seconds histogram",
            "guest_calls_in_flight gauge",
            "devices_withheld gauge",
            "rpc_requests counter",
            "rpc_duration_seconds histogram",
            "registrations counter",
            "reloads counter",
            "config_valid gauge",
            "config_set_info gauge",
            "kubelet_restarts counter",
            "list_and_watch_streams gauge",
            "dra_claims counter",
            "dra_claim_duration_seconds histogram",
            "dra_slice_publish_errors counter",
            "dra_slice_writes counter",
            "dra_published_generation gauge",
            "dra_published_slices gauge",
            "dra_driver_info gauge",
            "dra_passthrough_operations counter",
            "dra_passthrough_duration_seconds histogram",
        ],
        "{text}"
    );
}

#[test]
fn a_removed_resource_leaves_no_device_or_stream_series() {
    let metrics = Metrics::new();
    metrics.resource.set_devices("example.com/fuse", 3, 1);
    metrics.resource.set_withheld("example.com/fuse", 2);
    let _ = metrics
        .device_plugin
        .streams
        .get_or_create(&wdp_resource::ResourceLabel {
            resource: "example.com/fuse".to_owned(),
        });
    assert!(
        metrics
            .encode()
            .contains(r#"list_and_watch_streams{resource="example.com/fuse"} 0"#)
    );
    metrics.forget_resource("example.com/fuse");
    let text = metrics.encode();
    assert!(!text.contains("example.com/fuse"), "{text}");
}
