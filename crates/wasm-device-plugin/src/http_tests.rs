use super::*;

#[test]
fn text_unless_openmetrics_is_preferred() {
    assert!(!wants_openmetrics(None));
    assert!(!wants_openmetrics(Some("*/*")));
    assert!(!wants_openmetrics(Some("text/plain;version=0.0.4")));
    assert!(!wants_openmetrics(Some("application/json")));
    assert!(wants_openmetrics(Some(
        "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8"
    )));
    // Prometheus 2.x's default scrape header.
    assert!(wants_openmetrics(Some(
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
    )));
    // A scraper set to prefer text gets text.
    assert!(!wants_openmetrics(Some(
        "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5"
    )));
    assert!(!wants_openmetrics(Some(
        "application/openmetrics-text;q=0, */*"
    )));
}

#[test]
fn counters_are_named_by_their_samples_in_text_format() {
    let metrics = wdp_host::Metrics::new();
    metrics.host.reload(true);
    metrics.kubelet.registration("example.com/fuse", true);
    metrics.resource.set_devices("example.com/fuse", 3, 1);
    metrics.resource.observe_guest(
        "example.com/fuse",
        "shaper.wasm",
        "allocate",
        "ok",
        std::time::Duration::from_millis(1),
    );
    let openmetrics = metrics.encode();
    assert!(openmetrics.contains("# TYPE wasm_device_plugin_reloads counter"));
    assert!(openmetrics.ends_with("# EOF\n"));

    let text = prometheus_text(&openmetrics);
    assert!(!text.contains("# EOF"), "{text}");
    assert!(text.contains("# TYPE wasm_device_plugin_reloads_total counter\n"));
    assert!(text.contains("# HELP wasm_device_plugin_reloads_total Configuration reloads"));
    assert!(text.contains("wasm_device_plugin_reloads_total{result=\"success\"} 1\n"));
    assert!(text.contains("# TYPE wasm_device_plugin_devices gauge\n"));
    assert!(text.contains(
        "wasm_device_plugin_devices{resource=\"example.com/fuse\",health=\"unhealthy\"} 1\n"
    ));
    assert!(
        text.contains("# TYPE wasm_device_plugin_guest_call_duration_seconds histogram\n"),
        "{text}"
    );
    assert!(text.contains("wasm_device_plugin_guest_call_duration_seconds_count{"));
}
