//! Tests of `metrics`: what a DRA driver's families show in the exposition.

use super::*;

/// The DRA families in a registry of their own, and its exposition.
struct Exposed {
    registry: Registry,
    metrics: Arc<DraMetrics>,
}

impl Exposed {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("wasm_device_plugin");
        let kubelet = KubeletMetrics::register(&mut Registry::default(), latency_histogram);
        let metrics = DraMetrics::register(&mut registry, kubelet);
        Self { registry, metrics }
    }

    fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).unwrap();
        out
    }
}

#[test]
fn a_started_driver_shows_its_counters_at_zero() {
    let exposed = Exposed::new();
    let metrics = &exposed.metrics;
    metrics.set_driver("example.com/gpu", "gpu.example.com");
    let text = exposed.encode();
    for line in [
        r#"wasm_device_plugin_dra_slice_publish_errors_total{driver="gpu.example.com"} 0"#,
        r#"wasm_device_plugin_dra_slice_writes_total{driver="gpu.example.com"} 0"#,
        r#"wasm_device_plugin_dra_claims_total{driver="gpu.example.com",operation="prepare",result="failure"} 0"#,
        r#"wasm_device_plugin_dra_claims_total{driver="gpu.example.com",operation="unprepare",result="success"} 0"#,
        r#"wasm_device_plugin_dra_claim_duration_seconds_count{driver="gpu.example.com",operation="prepare"} 0"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn dra_records_show_up_in_the_exposition() {
    let exposed = Exposed::new();
    let metrics = &exposed.metrics;
    let driver = "gpu.example.com";
    metrics.observe_claim(
        driver,
        DraOperation::Prepare,
        true,
        Duration::from_millis(3),
    );
    metrics.observe_claim(
        driver,
        DraOperation::Prepare,
        false,
        Duration::from_millis(1),
    );
    metrics.observe_claim(driver, DraOperation::Unprepare, true, Duration::ZERO);
    metrics.publish_error(driver);
    metrics.set_published(driver, 7, 2);
    metrics.set_driver("example.com/gpu", driver);
    let text = exposed.encode();
    for line in [
        r#"wasm_device_plugin_dra_claims_total{driver="gpu.example.com",operation="prepare",result="success"} 1"#,
        r#"wasm_device_plugin_dra_claims_total{driver="gpu.example.com",operation="prepare",result="failure"} 1"#,
        r#"wasm_device_plugin_dra_claims_total{driver="gpu.example.com",operation="unprepare",result="success"} 1"#,
        r#"wasm_device_plugin_dra_claim_duration_seconds_count{driver="gpu.example.com",operation="prepare"} 2"#,
        r#"wasm_device_plugin_dra_slice_publish_errors_total{driver="gpu.example.com"} 1"#,
        r#"wasm_device_plugin_dra_published_generation{driver="gpu.example.com"} 7"#,
        r#"wasm_device_plugin_dra_published_slices{driver="gpu.example.com"} 2"#,
        r#"wasm_device_plugin_dra_driver_info{resource="example.com/gpu",driver="gpu.example.com"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
    metrics.forget_driver("example.com/gpu", driver);
    let text = exposed.encode();
    for gone in [
        r#"wasm_device_plugin_dra_published_generation{"#,
        r#"wasm_device_plugin_dra_driver_info{"#,
    ] {
        assert!(!text.contains(gone), "{text}");
    }
}
