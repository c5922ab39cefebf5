//! What an operator sees at the default log level when a policy starts
//! failing and recovers: one line each way, naming resource, guest and
//! hook; and a failing health guest cannot keep vanished hardware Healthy.

use crate::support::{WAIT, World, free_addr, http_get};

const GPU: &str = "example.com/gpu";

fn health_timeouts(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| {
            l.starts_with("wasm_device_plugin_guest_calls_total{")
                && l.contains("hook=\"health\"")
                && l.contains("result=\"timeout\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn a_failing_health_guest_is_logged_once_and_cannot_freeze_vanished_hardware() {
    let world = World::from_fixture("gpu-server");
    world.install_guest(wdp_guest_artifacts::HOSTILE_BUSY_HEALTH, "health.wasm");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        &format!(
            "version = 1\nresource = \"{GPU}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
             [hooks.health]\nguest = \"guests/health.wasm\"\ntimeout-ms = 100\non-error = \"fail\"\n"
        ),
    );
    let addr = free_addr();
    let kubelet = world.kubelet().await;
    let plugin = world.spawn_with(&["--metrics-addr", &addr]);
    let record = kubelet
        .wait_registered(GPU, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let busy = record.devices[0].id.clone();
    let unplugged = record.devices[1].id.clone();
    let devices = world.root().join("sys/bus/pci/devices");
    std::fs::write(devices.join(&busy).join("busy"), "1").unwrap();

    // Several polls time out; the log says so once, with its fields.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        // The endpoint listens once the host has started, which can be a
        // moment after the kubelet saw the registration: until then, no
        // answer is no timeout counted yet.
        let body = http_get(&addr, "/metrics")
            .await
            .map_or_else(|_| String::new(), |(_, body)| body);
        if health_timeouts(&body) >= 3.0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no health timeouts\n{}",
            plugin.log()
        );
        tokio::task::yield_now().await;
    }
    let log = plugin.wait_for_log("guest hook failing").await;
    let line = log
        .lines()
        .find(|l| l.contains("guest hook failing"))
        .unwrap_or_default();
    for field in [
        "resource=example.com/gpu",
        "guest=",
        "health.wasm",
        "hook=health",
        "timed out",
    ] {
        assert!(line.contains(field), "{field:?} missing from {line:?}");
    }

    // Hardware that vanishes while the guest fails goes Unhealthy: the
    // guest's last verdict only holds for hardware still there.
    std::fs::remove_file(devices.join(&unplugged)).unwrap();
    kubelet
        .wait_devices(GPU, WAIT, |d| {
            d.iter()
                .any(|d| d.id == unplugged && d.health == "Unhealthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    // Recovery is one INFO line; the failure was logged exactly once.
    std::fs::write(devices.join(&busy).join("busy"), "0").unwrap();
    plugin.wait_for_log("guest hook recovered").await;
    let log = plugin.log();
    assert_eq!(log.matches("guest hook failing").count(), 1, "{log}");
    assert!(
        !log.contains("\u{1b}["),
        "colour codes in a log that is not a terminal"
    );
}

#[tokio::test]
async fn garbage_in_an_attribute_is_logged_once_where_a_gpu_goes_unhealthy() {
    let world = World::from_fixture("gpu-server");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        &format!(
            "version = 1\nresource = \"{GPU}\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
        ),
    );
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    let record = kubelet
        .wait_registered(GPU, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let gpu = record.devices[0].id.clone();
    let vendor = world
        .root()
        .join("sys/bus/pci/devices")
        .join(&gpu)
        .join("vendor");
    // Replaced whole (write + rename), so no scan sees a half-written file.
    let replace = |text: &str| {
        let tmp = vendor.with_file_name(".vendor.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &vendor).unwrap();
    };
    replace("garbage\n");
    kubelet
        .wait_devices(GPU, WAIT, |d| {
            d.iter().any(|d| d.id == gpu && d.health == "Unhealthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let log = plugin.wait_for_log("resource problem").await;
    let line = log
        .lines()
        .find(|l| l.contains("resource problem"))
        .unwrap_or_default();
    assert!(line.contains("WARN") && line.contains(&gpu), "{line}");

    // Fixed: one INFO line, and the warning was not repeated at every poll.
    replace("0x10de\n");
    plugin.wait_for_log("resource problem cleared").await;
    let log = plugin.log();
    assert_eq!(log.matches("resource problem;").count(), 1, "{log}");
}
