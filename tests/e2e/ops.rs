//! What an operator relies on: `/healthz`, `/readyz`, Prometheus metrics
//! and JSON logs.

use crate::support::{WAIT, World, free_addr, http_get, metric_value, wait_metric};

const FUSE: &str = "ops.example.com/fuse";

fn world_with_guest() -> World {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "shaper.wasm");
    world.write_config(
        "fuse.toml",
        &format!(
            "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 4\n[hooks.allocate]\nguest = \"guests/shaper.wasm\"\n"
        ),
    );
    world
}

#[tokio::test]
async fn probes_and_metrics_tell_the_operator_what_happens() {
    let world = world_with_guest();
    let addr = free_addr();
    // The host starts before any kubelet exists: alive, not ready.
    let plugin = world.spawn_with(&["--metrics-addr", &addr]);
    let deadline = tokio::time::Instant::now() + WAIT;
    let healthz = loop {
        if let Ok(answer) = http_get(&addr, "/healthz").await {
            break answer;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no /healthz: {}",
            plugin.log()
        );
        tokio::task::yield_now().await;
    };
    assert_eq!(healthz.0, 200);
    let (code, body) = http_get(&addr, "/readyz").await.unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains(FUSE), "{body}");

    let mut kubelet = world.kubelet().await;
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while http_get(&addr, "/readyz").await.unwrap().0 != 200 {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::task::yield_now().await;
    }

    for _ in 0..3 {
        kubelet.admit(FUSE, 1).await.unwrap();
    }
    kubelet.restart().await.unwrap();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();

    let series = |s: &str| s.to_owned();
    let restarts = wait_metric(&addr, "wasm_device_plugin_kubelet_restarts_total", |n| {
        n >= 1.0
    })
    .await;
    assert!(restarts >= 1.0);
    let (_, body) = http_get(&addr, "/metrics").await.unwrap();
    let value =
        |s: String| metric_value(&body, &s).unwrap_or_else(|| panic!("{s} missing in\n{body}"));
    let r = format!("resource=\"{FUSE}\"");
    assert_eq!(
        value(series(&format!(
            "wasm_device_plugin_devices{{{r},health=\"healthy\"}}"
        ))),
        4.0
    );
    assert_eq!(
        value(series(&format!(
            "wasm_device_plugin_devices{{{r},health=\"unhealthy\"}}"
        ))),
        0.0
    );
    assert_eq!(
        value(format!("wasm_device_plugin_allocated_devices_total{{{r}}}")),
        3.0
    );
    assert_eq!(
        value(format!(
            "wasm_device_plugin_rpc_requests_total{{{r},rpc=\"Allocate\",code=\"Ok\"}}"
        )),
        3.0
    );
    assert_eq!(
        value(format!(
            "wasm_device_plugin_rpc_duration_seconds_count{{{r},rpc=\"Allocate\"}}"
        )),
        3.0
    );
    assert!(
        value(format!(
            "wasm_device_plugin_registrations_total{{{r},result=\"success\"}}"
        )) >= 2.0
    );
    assert_eq!(
        value(format!(
            "wasm_device_plugin_guest_calls_total{{{r},guest=\"shaper.wasm\",hook=\"allocate\",result=\"ok\"}}"
        )),
        3.0
    );
    assert_eq!(value(series("wasm_device_plugin_config_valid")), 1.0);
    assert!(
        body.contains("# TYPE wasm_device_plugin_guest_call_duration_seconds histogram"),
        "{body}"
    );
}

#[tokio::test]
async fn json_logs_are_one_object_per_line() {
    let world = world_with_guest();
    let kubelet = world.kubelet().await;
    let plugin = world.spawn_with(&["--log-format", "json"]);
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    // The plugin logs its registration once Register returned: wait for it.
    let log = plugin.wait_for_log("registered with the kubelet").await;
    let lines: Vec<&str> = log.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        let value: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            value.get("level").is_some() && value.get("fields").is_some(),
            "{line}"
        );
    }
}

#[test]
fn run_help_says_configuration_sets_use_the_kubeconfig_and_the_node_name() {
    let (code, help, stderr) = crate::support::run_to_end(&["run", "--help"]);
    assert_eq!(code, 0, "{stderr}");
    let option = |name: &str| -> String {
        let start = help.find(&format!("--{name}")).unwrap();
        let rest = &help[start..];
        let end = rest[2..].find("\n      --").map_or(rest.len(), |e| e + 2);
        rest[..end].split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let kubeconfig = option("kubeconfig");
    assert!(kubeconfig.contains("configuration sets"), "{kubeconfig}");
    assert!(!kubeconfig.contains("Unused without DRA"), "{kubeconfig}");
    let node_name = option("node-name");
    assert!(node_name.contains("configuration sets"), "{node_name}");
}
