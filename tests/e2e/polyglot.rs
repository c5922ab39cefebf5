//! The example policy in other languages: the packing scorer and the
//! health rule written in Python (componentize-py), JavaScript
//! (componentize-js) and C (clang + wasi-libc + wasm-tools), built by
//! `guests/polyglot/build.sh` into `target/polyglot/`, must behave exactly
//! like the Rust guests (`numa-packing`, `presence-health`) through the real
//! binary and the simulated kubelet.
//!
//! Each test runs one plugin with two resources over the same 8-GPU fixture
//! server: one whose hooks are the Rust guests, one whose hooks are the
//! other language's, and asks both the same questions.

use std::collections::BTreeSet;

use wdp_kubelet_api::v1beta1::{
    ContainerPreferredAllocationRequest, Device, PreferredAllocationRequest,
};

use crate::support::{WAIT, World};

const RUST: &str = "e2e.example.com/gpu-rust";

/// The path of a component built by `guests/polyglot/build.sh`.
macro_rules! polyglot {
    ($name:literal) => {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/polyglot/",
            $name,
            ".wasm"
        )
    };
}

/// Fails (never skips) when a component was not built.
fn built(path: &str) -> &str {
    assert!(
        std::path::Path::new(path).is_file(),
        "{path} is missing: build the polyglot guests first with \
         `bash guests/polyglot/build.sh` (then run `cargo test` again)"
    );
    path
}

/// A resource over every GPU of the fixture: Rust discovery, and the given
/// health and preferred-allocation guests.
fn resource(name: &str, health: &str, packing: &str) -> String {
    format!(
        r#"version = 1
resource = "{name}"

[[pci]]

[hooks.discovery]
guest = "guests/pci-filter.wasm"
[hooks.health]
guest = "guests/{health}"
timeout-ms = 5000
[hooks.preferred-allocation]
guest = "guests/{packing}"
timeout-ms = 5000

[guest-config]
vendors = "0x10de"
classes = "0x0302"
drivers = "nvidia"
"#
    )
}

/// A copy of the 8-GPU fixture server with a Rust resource and one for
/// `lang`'s guests.
fn world(lang: &str, packing: &str, health: &str) -> World {
    let world = World::from_fixture("gpu-server");
    world.install_guest(wdp_guest_artifacts::PCI_FILTER, "pci-filter.wasm");
    world.install_guest(wdp_guest_artifacts::NUMA_PACKING, "numa-packing.wasm");
    world.install_guest(wdp_guest_artifacts::PRESENCE_HEALTH, "presence-health.wasm");
    world.install_guest(packing, &format!("{lang}-packing.wasm"));
    world.install_guest(health, &format!("{lang}-health.wasm"));
    // Compiling a 12-18 MB Python or JavaScript component takes seconds:
    // keep the compiled code between runs.
    let cache = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/polyglot/.e2e-compiled"
    );
    world.write_config(
        "host.toml",
        &format!(
            "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n\
             precompiled-cache-dir = {cache:?}\n"
        ),
    );
    world.write_config(
        "rust.toml",
        &resource(RUST, "presence-health.wasm", "numa-packing.wasm"),
    );
    world.write_config(
        &format!("{lang}.toml"),
        &resource(
            &lang_resource(lang),
            &format!("{lang}-health.wasm"),
            &format!("{lang}-packing.wasm"),
        ),
    );
    world
}

fn lang_resource(lang: &str) -> String {
    format!("e2e.example.com/gpu-{lang}")
}

fn numa_of(devices: &[Device], id: &str) -> Vec<i64> {
    devices
        .iter()
        .find(|d| d.id == id)
        .and_then(|d| d.topology.as_ref())
        .map(|t| t.nodes.iter().map(|n| n.id).collect())
        .unwrap_or_default()
}

fn prefer(available: &[String], must: &[String], size: i32) -> PreferredAllocationRequest {
    PreferredAllocationRequest {
        container_requests: vec![ContainerPreferredAllocationRequest {
            available_device_i_ds: available.to_vec(),
            must_include_device_i_ds: must.to_vec(),
            allocation_size: size,
        }],
    }
}

/// Both resources answer every request the same; then the health guest
/// follows the driver link of a GPU.
async fn same_policy_as_rust(lang: &str, packing: &str, health: &str) {
    let world = world(lang, built(packing), built(health));
    let other = lang_resource(lang);
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    // Loading compiles the big components: allow for a slow (debug) build.
    let wait = WAIT * 8;
    let rust_record = kubelet
        .wait_registered(RUST, 1, wait)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let record = kubelet
        .wait_registered(&other, 1, wait)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let devices = record.devices.clone();
    assert_eq!(devices.len(), 8, "{devices:?}");
    let ids: BTreeSet<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    let rust_ids: BTreeSet<&str> = rust_record.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, rust_ids);

    // Requests: every size, no must-include, one on each NUMA node, two
    // across nodes, and a partial availability list.
    let all: Vec<String> = devices.iter().map(|d| d.id.clone()).collect();
    let on = |node: i64| -> Vec<String> {
        all.iter()
            .filter(|id| numa_of(&devices, id) == [node])
            .cloned()
            .collect()
    };
    let (node0, node1) = (on(0), on(1));
    assert!(!node0.is_empty() && !node1.is_empty(), "{devices:?}");
    let mut requests = Vec::new();
    for size in [1, 2, 4, 8] {
        requests.push(prefer(&all, &[], size));
        requests.push(prefer(&all, &[node1[0].clone()], size));
        requests.push(prefer(&all, &[node0.last().unwrap().clone()], size));
    }
    for size in [2, 4, 8] {
        requests.push(prefer(
            &all,
            &[node0[0].clone(), node1.last().unwrap().clone()],
            size,
        ));
    }
    let partial: Vec<String> = all.iter().skip(1).step_by(2).cloned().collect();
    requests.push(prefer(&partial, &[partial[0].clone()], 3));
    requests.push(prefer(&partial, &[], 2));

    let mut rust = kubelet.client(RUST).await.unwrap();
    let mut guest = kubelet.client(&other).await.unwrap();
    for request in requests {
        let want = rust
            .get_preferred_allocation(request.clone())
            .await
            .unwrap_or_else(|e| panic!("rust guest: {e}\n{}", plugin.log()))
            .into_inner();
        let got = guest
            .get_preferred_allocation(request.clone())
            .await
            .unwrap_or_else(|e| panic!("{lang} guest: {e}\n{}", plugin.log()))
            .into_inner();
        let (want, got) = (
            &want.container_responses[0].device_i_ds,
            &got.container_responses[0].device_i_ds,
        );
        let asked = &request.container_requests[0];
        assert_eq!(got, want, "{lang} and Rust differ on {asked:?}");
        assert_eq!(got.len(), asked.allocation_size as usize);
        assert!(
            asked
                .must_include_device_i_ds
                .iter()
                .all(|id| got.contains(id)),
            "{got:?} for {asked:?}"
        );
    }

    // A must-include ID that is not available: both refuse.
    let refused = |result: Result<_, tonic::Status>| result.map(drop).unwrap_err().code();
    let bad = prefer(&partial, &[all[0].clone()], 2);
    assert_eq!(
        refused(guest.get_preferred_allocation(bad.clone()).await),
        refused(rust.get_preferred_allocation(bad).await),
    );

    // Health guest: unbinding the driver makes the GPU unhealthy, binding
    // it again makes it healthy.
    let victim = all.last().unwrap().clone();
    let driver_link = world
        .root()
        .join("sys/bus/pci/devices")
        .join(&victim)
        .join("driver");
    let target = std::fs::read_link(&driver_link).unwrap();
    std::fs::remove_file(&driver_link).unwrap();
    for resource in [other.as_str(), RUST] {
        kubelet
            .wait_devices(resource, WAIT, |d| {
                d.iter().any(|d| d.id == victim && d.health == "Unhealthy")
                    && d.iter().filter(|d| d.health == "Healthy").count() == 7
            })
            .await
            .unwrap_or_else(|e| panic!("{resource}: {e}\n{}", plugin.log()));
    }
    std::os::unix::fs::symlink(&target, &driver_link).unwrap();
    for resource in [other.as_str(), RUST] {
        kubelet
            .wait_devices(resource, WAIT, |d| {
                d.len() == 8 && d.iter().all(|d| d.health == "Healthy")
            })
            .await
            .unwrap_or_else(|e| panic!("{resource}: {e}\n{}", plugin.log()));
    }

    let log = plugin.log();
    for guest in [
        format!("{lang}-packing.wasm"),
        format!("{lang}-health.wasm"),
    ] {
        assert!(
            !log.lines()
                .any(|l| l.contains(&guest) && (l.contains("ERROR") || l.contains("WARN"))),
            "{guest} complained:\n{log}"
        );
    }
    assert!(
        kubelet.state().violations.is_empty(),
        "{:?}",
        kubelet.state().violations
    );
}

#[tokio::test]
async fn python_guests_behave_like_the_rust_guests() {
    same_policy_as_rust(
        "python",
        polyglot!("python-packing"),
        polyglot!("python-health"),
    )
    .await;
}

#[tokio::test]
async fn javascript_guests_behave_like_the_rust_guests() {
    same_policy_as_rust("js", polyglot!("js-packing"), polyglot!("js-health")).await;
}

#[tokio::test]
async fn c_guests_behave_like_the_rust_guests() {
    same_policy_as_rust("c", polyglot!("c-packing"), polyglot!("c-health")).await;
}
