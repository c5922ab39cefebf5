//! Guest-driven hooks through the gRPC surface: every example guest on a
//! fixture GPU server, and hostile guests that may fail only their own call.

use std::collections::BTreeSet;
use std::time::Duration;

use wdp_kubelet_api::v1beta1::{
    AllocateRequest, ContainerAllocateRequest, ContainerPreferredAllocationRequest,
    PreStartContainerRequest, PreferredAllocationRequest,
};

use crate::support::{WAIT, World, run_to_end};

const GPU: &str = "e2e.example.com/gpu";

/// A world whose host root is a copy of the 8-GPU fixture server.
fn gpu_world() -> World {
    let world = World::from_fixture("gpu-server");
    for (built, name) in [
        (wdp_guest_artifacts::PCI_FILTER, "pci-filter.wasm"),
        (wdp_guest_artifacts::PRESENCE_HEALTH, "presence-health.wasm"),
        (wdp_guest_artifacts::NUMA_PACKING, "numa-packing.wasm"),
        (wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm"),
        (wdp_guest_artifacts::PRE_START_CHECK, "pre-start-check.wasm"),
    ] {
        world.install_guest(built, name);
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "gpu.toml",
        &format!(
            r#"version = 1
resource = "{GPU}"

# Every PCI function; the discovery guest keeps the GPUs.
[[pci]]

[hooks.discovery]
guest = "guests/pci-filter.wasm"
[hooks.health]
guest = "guests/presence-health.wasm"
[hooks.preferred-allocation]
guest = "guests/numa-packing.wasm"
[hooks.allocate]
guest = "guests/allocate-shaper.wasm"
[hooks.pre-start]
guest = "guests/pre-start-check.wasm"

[guest-config]
vendors = "0x10de"
classes = "0x0302"
env-prefix = "NVIDIA"
drivers = "nvidia"
"#
        ),
    );
    world
}

fn numa_of(devices: &[wdp_kubelet_api::v1beta1::Device], id: &str) -> Vec<i64> {
    devices
        .iter()
        .find(|d| d.id == id)
        .and_then(|d| d.topology.as_ref())
        .map(|t| t.nodes.iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn example_guests_drive_every_hook_on_a_gpu_server() {
    let world = gpu_world();
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    let record = kubelet
        .wait_registered(GPU, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    // Discovery guest: the 8 GPUs only, each with its NUMA node.
    let devices = record.devices.clone();
    assert_eq!(devices.len(), 8, "{devices:?}");
    let numa: BTreeSet<Vec<i64>> = devices.iter().map(|d| numa_of(&devices, &d.id)).collect();
    assert_eq!(numa, BTreeSet::from([vec![0], vec![1]]));
    assert!(record.registration.options.unwrap().pre_start_required);

    // Preferred-allocation guest: packs onto the must-include device's node.
    let all: Vec<String> = devices.iter().map(|d| d.id.clone()).collect();
    let anchor = all
        .iter()
        .find(|id| numa_of(&devices, id) == [1])
        .unwrap()
        .clone();
    let mut client = kubelet.client(GPU).await.unwrap();
    let answer = client
        .get_preferred_allocation(PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: all.clone(),
                must_include_device_i_ds: vec![anchor.clone()],
                allocation_size: 4,
            }],
        })
        .await
        .unwrap()
        .into_inner();
    let chosen = &answer.container_responses[0].device_i_ds;
    assert_eq!(chosen.len(), 4);
    assert!(chosen.contains(&anchor));
    assert!(
        chosen.iter().all(|id| numa_of(&devices, id) == [1]),
        "{chosen:?}"
    );

    // Allocate guest: the visible-devices variable; pre-start guest: ok.
    let admission = kubelet.admit(GPU, 2).await.unwrap();
    let visible = &admission.response.envs["NVIDIA_VISIBLE_DEVICES"];
    for id in &admission.devices {
        assert!(visible.contains(id.as_str()), "{visible} lacks {id}");
    }
    assert!(admission.pre_started);

    // Health guest: unbinding the driver makes the GPU unhealthy; binding
    // it again makes it healthy.
    let victim = all.last().unwrap().clone();
    let driver_link = world
        .root()
        .join("sys/bus/pci/devices")
        .join(&victim)
        .join("driver");
    let target = std::fs::read_link(&driver_link).unwrap();
    std::fs::remove_file(&driver_link).unwrap();
    kubelet
        .wait_devices(GPU, WAIT, |d| {
            d.iter().any(|d| d.id == victim && d.health == "Unhealthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    // A new device set (a new generation for the packing guest's table):
    // its answers name the healthy devices of the new set.
    let healthy: Vec<String> = all.iter().filter(|id| **id != victim).cloned().collect();
    let answer = client
        .get_preferred_allocation(PreferredAllocationRequest {
            container_requests: vec![ContainerPreferredAllocationRequest {
                available_device_i_ds: healthy.clone(),
                must_include_device_i_ds: vec![],
                allocation_size: 7,
            }],
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()))
        .into_inner();
    let chosen: BTreeSet<&String> = answer.container_responses[0].device_i_ds.iter().collect();
    assert_eq!(chosen, healthy.iter().collect::<BTreeSet<_>>());
    std::os::unix::fs::symlink(&target, &driver_link).unwrap();
    kubelet
        .wait_devices(GPU, WAIT, |d| d.iter().all(|d| d.health == "Healthy"))
        .await
        .unwrap();
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn pre_start_guest_refusal_reaches_the_kubelet_with_its_message() {
    let world = gpu_world();
    // Require an attribute no GPU has.
    let text = std::fs::read_to_string(world.config().join("gpu.toml")).unwrap();
    world.write_config(
        "gpu.toml",
        &format!("{text}require-attribute = \"pci.no-such-fact\"\n"),
    );
    let kubelet = world.kubelet().await;
    let _plugin = world.spawn();
    let record = kubelet.wait_registered(GPU, 1, WAIT).await.unwrap();
    let mut client = kubelet.client(GPU).await.unwrap();
    let err = client
        .pre_start_container(PreStartContainerRequest {
            devices_ids: vec![record.devices[0].id.clone()],
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    assert!(
        err.message().contains("pre-start-check"),
        "{}",
        err.message()
    );
    assert!(
        err.message().contains("pci.no-such-fact"),
        "{}",
        err.message()
    );
}

/// Hostile guests bound to hooks of their own resources, with a healthy
/// resource beside them that is admitted continuously meanwhile.
fn hostile_world() -> World {
    let world = World::new();
    world.add_node("/dev/fuse");
    for (built, name) in [
        (wdp_guest_artifacts::HOSTILE_INFINITE_LOOP, "loop.wasm"),
        (wdp_guest_artifacts::HOSTILE_MEMORY_BOMB, "bomb.wasm"),
        (wdp_guest_artifacts::HOSTILE_TRAP, "trap.wasm"),
        (wdp_guest_artifacts::HOSTILE_NONSENSE, "nonsense.wasm"),
        (wdp_guest_artifacts::HOSTILE_SLEEPER, "sleeper.wasm"),
    ] {
        world.install_guest(built, name);
    }
    world.write_config(
        "host.toml",
        "version = 1\n[hook-defaults]\ntimeout-ms = 100\nmemory-limit-mib = 16\n",
    );
    let resource = |name: &str, hooks: &str| {
        world.write_config(
            &format!("{name}.toml"),
            &format!(
                "version = 1\nresource = \"hostile.example.com/{name}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 4\n{hooks}"
            ),
        );
    };
    resource("good", "");
    resource(
        "looping",
        "[hooks.allocate]\nguest = \"guests/loop.wasm\"\n[hooks.preferred-allocation]\nguest = \"guests/loop.wasm\"\n",
    );
    // Only the looping guest needs the short default deadline; the others
    // get a long one, so that on a loaded machine they still fail the way
    // they misbehave (memory cap, trap, refused answer), not by timing out.
    resource(
        "bomb",
        "[hooks.allocate]\nguest = \"guests/bomb.wasm\"\ntimeout-ms = 10000\n",
    );
    resource(
        "trap",
        "[hooks.allocate]\nguest = \"guests/trap.wasm\"\ntimeout-ms = 10000\n[hooks.pre-start]\nguest = \"guests/trap.wasm\"\ntimeout-ms = 10000\n",
    );
    resource(
        "nonsense",
        "[hooks.allocate]\nguest = \"guests/nonsense.wasm\"\ntimeout-ms = 10000\n[hooks.preferred-allocation]\nguest = \"guests/nonsense.wasm\"\ntimeout-ms = 10000\n",
    );
    resource(
        "fallback",
        "[hooks.allocate]\nguest = \"guests/trap.wasm\"\non-error = \"builtin\"\n[hooks.preferred-allocation]\nguest = \"guests/loop.wasm\"\non-error = \"builtin\"\n",
    );
    resource(
        "sleeper",
        "[hooks.allocate]\nguest = \"guests/sleeper.wasm\"\ntimeout-ms = 10000\n",
    );
    world
}

fn allocate_one(id: &str) -> AllocateRequest {
    AllocateRequest {
        container_requests: vec![ContainerAllocateRequest {
            devices_ids: vec![id.to_owned()],
        }],
    }
}

fn prefer(ids: &[String], size: i32) -> PreferredAllocationRequest {
    PreferredAllocationRequest {
        container_requests: vec![ContainerPreferredAllocationRequest {
            available_device_i_ds: ids.to_vec(),
            must_include_device_i_ds: vec![],
            allocation_size: size,
        }],
    }
}

/// Asserts an RPC failed with `code` and a message holding every needle.
fn expect<T: std::fmt::Debug>(
    result: Result<T, tonic::Status>,
    code: tonic::Code,
    needles: &[&str],
) {
    let err = result.unwrap_err();
    assert_eq!(err.code(), code, "{err:?}");
    for needle in needles {
        assert!(
            err.message().contains(needle),
            "{needle:?} not in {:?}",
            err.message()
        );
    }
}

#[tokio::test]
async fn hostile_guests_fail_only_their_own_calls() {
    let world = hostile_world();
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    let names = [
        "good", "looping", "bomb", "trap", "nonsense", "fallback", "sleeper",
    ];
    for name in names {
        kubelet
            .wait_registered(&format!("hostile.example.com/{name}"), 1, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", plugin.log()));
    }
    let ids: Vec<String> = (0..4).map(|i| format!("fuse::{i}")).collect();
    let client = |name: &str| {
        let resource = format!("hostile.example.com/{name}");
        let kubelet = &kubelet;
        async move { kubelet.client(&resource).await }
    };

    // The good resource is admitted continuously while the hostile calls run.
    let good = {
        let mut good = client("good").await.unwrap();
        let ids = ids.clone();
        tokio::spawn(async move {
            let mut served = 0;
            for round in 0..200 {
                good.allocate(allocate_one(&ids[round % 4])).await.unwrap();
                good.get_preferred_allocation(prefer(&ids, 2))
                    .await
                    .unwrap();
                served += 1;
            }
            served
        })
    };

    let mut looping = client("looping").await.unwrap();
    let mut bomb = client("bomb").await.unwrap();
    let mut trap = client("trap").await.unwrap();
    let mut nonsense = client("nonsense").await.unwrap();
    let mut sleeper = client("sleeper").await.unwrap();
    for _ in 0..3 {
        expect(
            looping.allocate(allocate_one("fuse::0")).await,
            tonic::Code::DeadlineExceeded,
            &["loop.wasm", "allocate"],
        );
        expect(
            looping.get_preferred_allocation(prefer(&ids, 2)).await,
            tonic::Code::DeadlineExceeded,
            &["loop.wasm", "preferred-allocation"],
        );
        expect(
            bomb.allocate(allocate_one("fuse::1")).await,
            tonic::Code::Internal,
            &["bomb.wasm", "allocate"],
        );
        expect(
            trap.allocate(allocate_one("fuse::2")).await,
            tonic::Code::Internal,
            &["trap.wasm", "allocate"],
        );
        expect(
            trap.pre_start_container(PreStartContainerRequest {
                devices_ids: vec!["fuse::2".into()],
            })
            .await,
            tonic::Code::Internal,
            &["trap.wasm", "pre-start"],
        );
        expect(
            nonsense.allocate(allocate_one("fuse::3")).await,
            tonic::Code::Internal,
            &["nonsense.wasm", "invalid answer"],
        );
        expect(
            nonsense.get_preferred_allocation(prefer(&ids, 2)).await,
            tonic::Code::Internal,
            &["nonsense.wasm", "invalid answer"],
        );
        expect(
            sleeper.allocate(allocate_one("fuse::0")).await,
            tonic::Code::Internal,
            &["sleeper.wasm", "allocate", "block"],
        );
    }

    // on-error = "builtin": the same failures answer with the built-in policy.
    let mut fallback = client("fallback").await.unwrap();
    let response = fallback
        .allocate(allocate_one("fuse::0"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        response.container_responses[0].devices[0].host_path,
        "/dev/fuse"
    );
    let preferred = fallback
        .get_preferred_allocation(prefer(&ids, 2))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(preferred.container_responses[0].device_i_ds.len(), 2);

    let served = tokio::time::timeout(WAIT, good).await.unwrap().unwrap();
    assert_eq!(served, 200);
    // The host is still whole: every resource still registered and listed.
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
    assert!(plugin.wait(Duration::ZERO).await.is_none(), "the host died");
}

#[tokio::test]
async fn guests_that_cannot_load_are_refused_by_name() {
    let cases = [
        (
            wdp_guest_artifacts::HOSTILE_WRONG_EXPORT,
            "pre-start",
            "telemetry",
        ),
        (
            wdp_guest_artifacts::HOSTILE_BAD_IMPORT,
            "pre-start",
            "import",
        ),
        (wdp_guest_artifacts::HOSTILE_WRONG_VERSION, "health", "0.2"),
        (
            wdp_guest_artifacts::PCI_FILTER,
            "allocate",
            "does not export the allocate hook",
        ),
    ];
    for (built, hook, needle) in cases {
        let world = World::new();
        world.add_node("/dev/fuse");
        world.install_guest(built, "g.wasm");
        world.write_config(
            "r.toml",
            &format!("version = 1\nresource = \"a.example.com/x\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.{hook}]\nguest = \"guests/g.wasm\"\n"),
        );
        let (code, _, stderr) = run_to_end(&[
            "check",
            "--config-dir",
            world.config().to_str().unwrap(),
            "--host-root",
            world.root().to_str().unwrap(),
        ]);
        assert_ne!(code, 0, "{built} loaded");
        assert!(
            stderr.contains("r.toml") && stderr.contains("g.wasm"),
            "{stderr}"
        );
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
}

#[tokio::test]
async fn test_command_exercises_every_hook_offline_against_a_fixture() {
    let world = gpu_world();
    let (code, stdout, stderr) = run_to_end(&[
        "test",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
        "--size",
        "2",
        "--must-include",
        "0000:87:00.0",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("discovery + health: 8 devices"), "{stdout}");
    // The must-include GPU and its partner behind the same PCIe switch.
    assert!(
        stdout.contains(r#"preferred-allocation (size 2): ["0000:87:00.0", "0000:88:00.0"]"#),
        "switch partner expected:\n{stdout}"
    );
    assert!(
        stdout.contains("env NVIDIA_VISIBLE_DEVICES=0000:87:00.0,0000:88:00.0"),
        "{stdout}"
    );
    assert!(stdout.contains("pre-start: ok"), "{stdout}");
}
