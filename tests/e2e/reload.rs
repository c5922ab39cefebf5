//! Live reload while the kubelet admits continuously: good changes are
//! applied, bad ones refused with the last good state serving, and not one
//! kubelet call fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use wdp_kubelet_api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    PreferredAllocationRequest,
};

use crate::support::{WAIT, World, free_addr, wait_metric};

const STABLE: &str = "reload.example.com/stable";
const EXTRA: &str = "reload.example.com/extra";
const FAILED_RELOADS: &str = "wasm_device_plugin_reloads_total{result=\"failure\"}";
const VALID: &str = "wasm_device_plugin_config_valid";

fn stable_config(replicas: u32, prefix: &str) -> String {
    format!(
        r#"version = 1
resource = "{STABLE}"
[[nodes]]
path = "/dev/fuse"
replicas = {replicas}

[hooks.allocate]
guest = "guests/shaper.wasm"
[hooks.preferred-allocation]
guest = "guests/packing.wasm"

[guest-config]
env-prefix = "{prefix}"
"#
    )
}

/// Calls Allocate and GetPreferredAllocation on `STABLE` until `stop`,
/// counting calls and failures, each on the currently advertised IDs.
struct Load {
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Load {
    async fn start(kubelet: &wdp_kubelet_sim::SimKubelet) -> Self {
        let mut client = kubelet.client(STABLE).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, c, f) = (stop.clone(), calls.clone(), failures.clone());
        let task = tokio::spawn(async move {
            // Two IDs exist in every configuration this test applies.
            let ids = vec!["fuse::0".to_owned(), "fuse::1".to_owned()];
            while !s.load(Ordering::Relaxed) {
                let allocate = client
                    .allocate(AllocateRequest {
                        container_requests: vec![ContainerAllocateRequest {
                            devices_ids: vec![ids[0].clone()],
                        }],
                    })
                    .await;
                let preferred = client
                    .get_preferred_allocation(PreferredAllocationRequest {
                        container_requests: vec![ContainerPreferredAllocationRequest {
                            available_device_i_ds: ids.clone(),
                            must_include_device_i_ds: vec![],
                            allocation_size: 1,
                        }],
                    })
                    .await;
                c.fetch_add(2, Ordering::Relaxed);
                for e in [allocate.err(), preferred.err()].into_iter().flatten() {
                    f.lock().unwrap().push(e.to_string());
                }
            }
        });
        Self {
            stop,
            calls,
            failures,
            task,
        }
    }

    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let failures = self.failures.lock().unwrap().clone();
        (self.calls.load(Ordering::Relaxed), failures)
    }
}

async fn allocate_env(kubelet: &wdp_kubelet_sim::SimKubelet, key: &str) -> Option<String> {
    let mut client = kubelet.client(STABLE).await.unwrap();
    let response = client
        .allocate(AllocateRequest {
            container_requests: vec![ContainerAllocateRequest {
                devices_ids: vec!["fuse::0".to_owned()],
            }],
        })
        .await
        .unwrap()
        .into_inner();
    response.container_responses[0].envs.get(key).cloned()
}

fn reload_world() -> World {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "shaper.wasm");
    world.install_guest(wdp_guest_artifacts::NUMA_PACKING, "packing.wasm");
    world.write_config("host.toml", "version = 1\nreload-debounce-ms = 30\n");
    world.write_config("stable.toml", &stable_config(2, "FIRST"));
    world
}

#[tokio::test]
async fn edits_apply_live_and_bad_edits_change_nothing() {
    let world = reload_world();
    let metrics = free_addr();
    let kubelet = world.kubelet().await;
    let plugin = world.spawn_with(&["--metrics-addr", &metrics]);
    kubelet
        .wait_registered(STABLE, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    // The shaper names the shared device, not the replica.
    assert_eq!(
        allocate_env(&kubelet, "FIRST_VISIBLE_DEVICES")
            .await
            .as_deref(),
        Some("fuse")
    );
    let load = Load::start(&kubelet).await;
    // Waits for at least one more refused reload than counted so far.
    let mut refusals = 0.0;
    let refused = async |refusals: &mut f64| {
        let seen = *refusals;
        *refusals = wait_metric(&metrics, FAILED_RELOADS, |n| n > seen).await;
        wait_metric(&metrics, VALID, |v| v == 0.0).await;
    };

    // A good edit: more replicas, one ListAndWatch update.
    world.write_config("stable.toml", &stable_config(3, "FIRST"));
    kubelet
        .wait_devices(STABLE, WAIT, |d| d.len() == 3)
        .await
        .unwrap();

    // A guest-config edit: new calls see the new settings.
    world.write_config("stable.toml", &stable_config(3, "SECOND"));
    wait_metric(&metrics, VALID, |v| v == 1.0).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    while allocate_env(&kubelet, "SECOND_VISIBLE_DEVICES")
        .await
        .is_none()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "new guest config never served"
        );
        tokio::task::yield_now().await;
    }

    // A new file: a new resource registers; removing it ends its socket.
    world.write_config(
        "extra.toml",
        &format!("version = 1\nresource = \"{EXTRA}\"\n[[nodes]]\npath = \"/dev/fuse\"\n"),
    );
    kubelet.wait_registered(EXTRA, 1, WAIT).await.unwrap();
    std::fs::remove_file(world.config().join("extra.toml")).unwrap();
    kubelet
        .wait_for("extra's stream to end", WAIT, |s| {
            s.plugins.get(EXTRA).is_some_and(|p| !p.streaming)
        })
        .await
        .unwrap();
    assert_eq!(
        world.plugin_sockets().len(),
        1,
        "{:?}",
        world.plugin_sockets()
    );

    // Bad edits, each refused; the last good state keeps serving.
    let bad_edits: [(&str, &str, String); 4] = [
        (
            "malformed TOML",
            "stable.toml",
            "version = 1\nresource = \"reload.example.com/stable\n".to_owned(),
        ),
        (
            "unknown key",
            "stable.toml",
            stable_config(5, "BAD").replace("[[nodes]]", "surprise = true\n[[nodes]]"),
        ),
        (
            "missing guest",
            "stable.toml",
            stable_config(5, "BAD").replace("shaper.wasm", "absent.wasm"),
        ),
        ("duplicate resource", "copy.toml", stable_config(5, "BAD")),
    ];
    for (what, file, text) in &bad_edits {
        world.write_config(file, text);
        refused(&mut refusals).await;
        let devices = kubelet.plugin(STABLE).unwrap().devices;
        assert_eq!(devices.len(), 3, "{what}: the device list changed");
        assert!(
            allocate_env(&kubelet, "SECOND_VISIBLE_DEVICES")
                .await
                .is_some(),
            "{what}"
        );
        // Undo it: the same good configuration is valid again.
        if *file == "stable.toml" {
            world.write_config(file, &stable_config(3, "SECOND"));
        } else {
            std::fs::remove_file(world.config().join(file)).unwrap();
        }
        wait_metric(&metrics, VALID, |v| v == 1.0).await;
    }
    // A broken guest (garbage bytes where the component was).
    std::fs::write(world.config().join("guests/shaper.wasm"), b"\0asm garbage").unwrap();
    world.write_config("stable.toml", &stable_config(3, "THIRD"));
    refused(&mut refusals).await;
    assert!(
        allocate_env(&kubelet, "SECOND_VISIBLE_DEVICES")
            .await
            .is_some()
    );

    // A half-written file is refused; once complete it is applied.
    std::fs::copy(
        wdp_guest_artifacts::ALLOCATE_SHAPER,
        world.config().join("guests/shaper.wasm"),
    )
    .unwrap();
    let full = stable_config(2, "FOURTH");
    std::fs::write(world.config().join("stable.toml"), &full[..full.len() / 2]).unwrap();
    std::fs::write(world.config().join("stable.toml"), &full).unwrap();
    kubelet
        .wait_devices(STABLE, WAIT, |d| d.len() == 2)
        .await
        .unwrap();
    wait_metric(&metrics, VALID, |v| v == 1.0).await;

    let (calls, failures) = load.finish().await;
    assert!(calls > 0);
    assert!(
        failures.is_empty(),
        "{} of {calls} kubelet calls failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn a_configmap_style_symlink_swap_is_applied() {
    // The layout a ConfigMap volume has: files are symlinks through `..data`,
    // which is swapped atomically to a new timestamped directory.
    let world = World::new();
    world.add_node("/dev/fuse");
    let config = world.config();
    let version = |n: u32, replicas: u32| {
        let dir = config.join(format!("..2026_11_21_{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("stable.toml"),
            format!("version = 1\nresource = \"{STABLE}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = {replicas}\n"),
        )
        .unwrap();
        dir
    };
    let first = version(1, 2);
    std::os::unix::fs::symlink(first.file_name().unwrap(), config.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/stable.toml", config.join("stable.toml")).unwrap();

    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    let record = kubelet.wait_registered(STABLE, 1, WAIT).await.unwrap();
    assert_eq!(record.devices.len(), 2);

    let second = version(2, 5);
    std::os::unix::fs::symlink(second.file_name().unwrap(), config.join("..data_tmp")).unwrap();
    std::fs::rename(config.join("..data_tmp"), config.join("..data")).unwrap();
    std::fs::remove_dir_all(first).unwrap();
    kubelet
        .wait_devices(STABLE, WAIT, |d| d.len() == 5)
        .await
        .unwrap();
}

#[tokio::test]
async fn changed_registration_options_register_again() {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.write_config("host.toml", "version = 1\nreload-debounce-ms = 20\n");
    let text = |preferred: bool| {
        format!(
            "version = 1\nresource = \"{STABLE}\"\nget-preferred-allocation = {preferred}\n[[nodes]]\npath = \"/dev/fuse\"\n"
        )
    };
    world.write_config("stable.toml", &text(true));
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    let first = kubelet.wait_registered(STABLE, 1, WAIT).await.unwrap();
    assert!(
        first
            .registration
            .options
            .unwrap()
            .get_preferred_allocation_available
    );

    world.write_config("stable.toml", &text(false));
    let state = kubelet
        .wait_for("a second registration", WAIT, |s| {
            s.plugins.get(STABLE).is_some_and(|p| {
                p.registrations >= 2
                    && !p
                        .registration
                        .options
                        .unwrap()
                        .get_preferred_allocation_available
                    && p.lists_received > 0
            })
        })
        .await
        .unwrap();
    // The same socket kept serving: the kubelet dialled it again.
    assert_eq!(
        state.plugins[STABLE].registration.endpoint,
        first.registration.endpoint
    );
    assert!(state.refusals.is_empty(), "{:?}", state.refusals);
}

#[tokio::test]
async fn an_edit_leaves_untouched_resources_alone() {
    const BYSTANDER: &str = "reload.example.com/bystander";
    let world = reload_world();
    world.write_config(
        "host.toml",
        "version = 1\nreload-debounce-ms = 20\npoll-interval-ms = 600000\n",
    );
    for i in 0..64 {
        world.add_node(&format!("/dev/many/n{i}"));
    }
    world.install_guest(wdp_guest_artifacts::PRESENCE_HEALTH, "health.wasm");
    world.write_config(
        "bystander.toml",
        &format!(
            "version = 1\nresource = \"{BYSTANDER}\"\n[[nodes]]\npath = \"/dev/many/n*\"\n\
             [hooks.health]\nguest = \"guests/health.wasm\"\n"
        ),
    );
    let metrics = free_addr();
    let kubelet = world.kubelet().await;
    let plugin = world.spawn_with(&["--metrics-addr", &metrics]);
    for resource in [STABLE, BYSTANDER] {
        kubelet
            .wait_registered(resource, 1, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    }
    let health_calls = format!(
        "wasm_device_plugin_guest_calls_total{{resource=\"{BYSTANDER}\",guest=\"health.wasm\",hook=\"health\",result=\"ok\"}}"
    );
    let before = wait_metric(&metrics, &health_calls, |n| n >= 1.0).await;

    // Edits of the other resource, served one after the other.
    for prefix in ["SECOND", "THIRD"] {
        world.write_config("stable.toml", &stable_config(2, prefix));
        let key = format!("{prefix}_VISIBLE_DEVICES");
        let deadline = tokio::time::Instant::now() + WAIT;
        while allocate_env(&kubelet, &key).await.is_none() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "edit never served\n{}",
                plugin.log()
            );
            tokio::task::yield_now().await;
        }
    }
    // The bystander's health guest was not called again (no dry run, no
    // rediscovery), and it never re-registered.
    let after = wait_metric(&metrics, &health_calls, |_| true).await;
    assert_eq!(after, before, "the untouched resource was re-checked");
    assert_eq!(kubelet.plugin(BYSTANDER).unwrap().registrations, 1);
}
