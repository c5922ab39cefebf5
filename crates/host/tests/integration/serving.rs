//! The host crate served in-process to the simulated kubelet: what the
//! kubelet notices while policies misbehave.

use std::time::Duration;

use crate::common::{WAIT, World, allocate_one, sample, wait_metrics};

const GPU: &str = "example.com/gpu";

/// The 8-GPU fixture server with `health` as the health guest (timeout
/// `timeout_ms`), the example allocate guest, and `extra` appended to the
/// resource file.
fn gpu_world(health: &str, timeout_ms: u64, extra: &str) -> World {
    let world = World::new(Some("gpu-server"));
    world.install_guest(health, "health.wasm");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate.wasm");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        &format!(
            r#"version = 1
resource = "{GPU}"
{extra}
[[pci]]
vendor = "0x10de"
class = "0x0302"

[hooks.health]
guest = "guests/health.wasm"
timeout-ms = {timeout_ms}
[hooks.allocate]
guest = "guests/allocate.wasm"
"#
        ),
    );
    world
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocate_is_answered_while_a_health_guest_spins() {
    // A health call that spins for 8 s once the GPU's `busy` reads 1
    // (the test's runtime waits for it to end).
    let world = gpu_world(wdp_guest_artifacts::HOSTILE_BUSY_HEALTH, 8_000, "");
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let gpu = record.devices[0].id.clone();
    world.write_host(&format!("/sys/bus/pci/devices/{gpu}/busy"), "1");
    let spinning = |m: &str| {
        sample(
            m,
            "wasm_device_plugin_guest_calls_in_flight",
            &[("hook", "health")],
        ) >= 1.0
    };
    wait_metrics(&host, "the health guest to spin", spinning).await;

    let mut client = kubelet.client(GPU).await.unwrap();
    for _ in 0..20 {
        let answer = tokio::time::timeout(WAIT, client.allocate(allocate_one(&gpu)))
            .await
            .expect("Allocate waited for the health guest")
            .expect("Allocate failed");
        assert!(!answer.into_inner().container_responses[0].envs.is_empty());
    }
    // Every Allocate was answered while the health call was still running.
    assert!(spinning(&host.metrics().encode()));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guests_own_writes_do_not_wake_its_health_again() {
    let world = gpu_world(
        wdp_guest_artifacts::HOSTILE_FEEDBACK_WRITER,
        1_000,
        "writable-attributes = [\"power_state\"]\n",
    );
    for entry in std::fs::read_dir(world.root().join("sys/bus/pci/devices")).unwrap() {
        std::fs::write(entry.unwrap().path().join("power_state"), "D3hot").unwrap();
    }
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let health_calls = |m: &str| {
        sample(
            m,
            "wasm_device_plugin_guest_calls_total",
            &[("hook", "health")],
        )
    };
    // One hardware event (a new attribute file), so health runs again with
    // its watches in place. Polls are a minute apart: after that call only
    // a couple more may run. Each call writes every GPU; were those writes
    // taken for hardware changes, health would run back to back (hundreds
    // of calls a second).
    world.write_host("/sys/bus/pci/devices/0000:03:00.0/event", "1");
    wait_metrics(&host, "a health call after the event", |m| {
        health_calls(m) >= 2.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let calls = health_calls(&host.metrics().encode());
    assert!((2.0..=4.0).contains(&calls), "{calls} health calls");
    let written = std::fs::read_to_string(
        world
            .root()
            .join("sys/bus/pci/devices/0000:03:00.0/power_state"),
    );
    assert_eq!(written.unwrap(), "D0", "the guest's write went through");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_bombs_are_refused_by_guest_and_hook_and_the_last_state_serves() {
    let world = World::new(None);
    world.install_guest(wdp_guest_artifacts::HOSTILE_SIZE_BOMB, "bomb.wasm");
    world.write_host("/dev/bomb0", "");
    world.write_host("/dev/solo", "");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "bomb.toml",
        r#"version = 1
resource = "example.com/bomb"
[[nodes]]
path = "/dev/bomb*"
[hooks.discovery]
guest = "guests/bomb.wasm"
[hooks.allocate]
guest = "guests/bomb.wasm"
on-error = "builtin"
"#,
    );
    world.write_config(
        "solo.toml",
        r#"version = 1
resource = "example.com/solo"
[[nodes]]
path = "/dev/solo"
[hooks.allocate]
guest = "guests/bomb.wasm"
on-error = "fail"
"#,
    );
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let bomb = kubelet
        .wait_registered("example.com/bomb", 1, WAIT)
        .await
        .unwrap();
    kubelet
        .wait_registered("example.com/solo", 1, WAIT)
        .await
        .unwrap();
    assert_eq!(bomb.devices.len(), 1);
    let first = bomb.devices[0].id.clone();

    // A second node turns discovery into 2 × 4,294,967,295 device IDs:
    // refused before anything is built, the last list keeps serving.
    world.write_host("/dev/bomb1", "");
    wait_metrics(&host, "the refused discovery answer", |m| {
        sample(
            m,
            "wasm_device_plugin_guest_calls_total",
            &[("hook", "discovery"), ("result", "invalid-answer")],
        ) >= 1.0
    })
    .await;
    let served = host.resource("example.com/bomb").await.unwrap().devices();
    let ids: Vec<&str> = served.devices().iter().map(|d| d.id()).collect();
    assert_eq!(ids, [first.as_str()]);

    // A 5 MiB Allocate answer: with on-error = builtin the built-in answer
    // is served; with fail the kubelet is told which guest and hook.
    let mut client = kubelet.client("example.com/bomb").await.unwrap();
    let answer = client
        .allocate(allocate_one(&first))
        .await
        .unwrap()
        .into_inner();
    let response = &answer.container_responses[0];
    assert!(response.envs.is_empty(), "the oversized answer was served");
    assert_eq!(response.devices[0].host_path, "/dev/bomb0");

    let mut solo = kubelet.client("example.com/solo").await.unwrap();
    let status = solo.allocate(allocate_one("solo")).await.unwrap_err();
    let message = status.message();
    for part in ["bomb.wasm", "allocate", "4194304-byte"] {
        assert!(message.contains(part), "{part:?} missing from {message:?}");
    }
    host.shutdown().await;
}
