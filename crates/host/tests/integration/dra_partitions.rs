//! DRA partitions, shared counters, device status and admin access decided
//! by a guest (WIT 0.1.2): the `gpu-partitions` example guest on the 8-GPU
//! fixture, served in-process against the fake API server, which refuses
//! any slice or claim status the real API server would refuse.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common::WAIT;
use crate::common::dra_world::*;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};

/// The fixture's GPUs as driver `gpu.example.com`, the guest bound to the
/// three DRA hooks with the attributes it writes granted; `extra` goes
/// into `[guest-config]`.
fn partitions_config(extra: &str) -> String {
    format!(
        "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n\
         writable-attributes = [\"partition_create\", \"partition_remove\"]\n\
         [[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
         [hooks.dra-layout]\nguest = \"guests/partitions.wasm\"\n\
         [hooks.dra-prepare]\nguest = \"guests/partitions.wasm\"\n\
         [hooks.dra-unprepare]\nguest = \"guests/partitions.wasm\"\n\
         [guest-config]\n{extra}"
    )
}

/// The 8-GPU world with the partitions guest and the create/remove
/// attribute files a driver would offer under each GPU.
async fn partitions_world(extra: &str) -> DraWorld {
    let w = DraWorld::new("").await;
    w.world.write_config("gpu.toml", &partitions_config(extra));
    w.world
        .install_guest(wdp_guest_artifacts::GPU_PARTITIONS, "partitions.wasm");
    for gpu in gpu_dirs(&w) {
        std::fs::write(gpu.join("partition_create"), "").unwrap();
        std::fs::write(gpu.join("partition_remove"), "").unwrap();
    }
    w
}

/// The sysfs folders of the fixture's GPUs (NVIDIA, class 0x0302).
fn gpu_dirs(w: &DraWorld) -> Vec<PathBuf> {
    let devices = w.world.root().join("sys/bus/pci/devices");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&devices)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::read_to_string(p.join("class")).is_ok_and(|c| c.starts_with("0x0302")))
        .map(|p| p.canonicalize().unwrap())
        .collect();
    dirs.sort();
    dirs
}

fn read(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every device of the driver's slices, by name.
fn published_devices(slices: &[ResourceSlice]) -> BTreeMap<String, serde_json::Value> {
    slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER)
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| (d.name.clone(), serde_json::to_value(d).unwrap()))
        .collect()
}

/// Every counter set of the driver's slices, by name.
fn published_counter_sets(slices: &[ResourceSlice]) -> BTreeMap<String, serde_json::Value> {
    slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER)
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
        .map(|c| (c.name.clone(), serde_json::to_value(c).unwrap()))
        .collect()
}

/// 8 whole GPUs and, per GPU, 7 + 3 + 2 partitions of the default profiles.
const WHOLE_AND_PARTITIONS: usize = 8 + 8 * 12;

/// A claim allocated partition `device` (request `gpus`).
fn partition_claim(name: &str, device: &str) -> ResourceClaim {
    claim(name, DRIVER, &[device])
}

/// The claim's `status.devices` as the API server holds it.
fn device_statuses(w: &DraWorld, claim: &ResourceClaim) -> Vec<serde_json::Value> {
    let stored = w
        .api
        .claim("default", claim.metadata.name.as_deref().unwrap())
        .unwrap();
    stored
        .status
        .and_then(|s| s.devices)
        .unwrap_or_default()
        .into_iter()
        .map(|d| serde_json::to_value(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_published_with_counters_created_at_prepare_and_removed_at_unprepare() {
    let w = partitions_world("").await;
    let host = w.start().await;
    crate::common::dra_world::wait_for_socket(&w.registration_socket()).await;
    let (endpoint, _) = w.register().await;
    w.wait_published(WHOLE_AND_PARTITIONS).await;

    // Read back from the API server, which validated every slice.
    let slices = w.api.slices_of(NODE, DRIVER);
    let devices = published_devices(&slices);
    let sets = published_counter_sets(&slices);
    assert_eq!(sets.len(), 8, "{sets:?}");
    assert_eq!(
        sets["gpu-0000-03-00-0"]["counters"],
        serde_json::json!({"memory": {"value": "80Gi"}, "slices": {"value": "7"}})
    );
    let partition = &devices["gpu-0000-03-00-0-1g-10gb-0"];
    assert_eq!(
        partition["consumesCounters"],
        serde_json::json!([{"counterSet": "gpu-0000-03-00-0", "counters": {"memory": {"value": "10Gi"}, "slices": {"value": "1"}}}])
    );
    assert_eq!(
        partition["attributes"][format!("{DRIVER}/profile")],
        serde_json::json!({"string": "1g.10gb"})
    );
    let whole = &devices[&name_of(GPU_A)];
    assert_eq!(
        whole["consumesCounters"][0]["counters"]["slices"],
        serde_json::json!({"value": "7"})
    );

    // Prepare: the guest creates the partition through the granted write,
    // and its status lands in the claim.
    let claimed = w
        .api
        .put_claim(partition_claim("mig", "gpu-0000-03-00-0-1g-10gb-0"));
    let answer = prepare_one(&endpoint, &claimed).await;
    assert_eq!(answer.error, "");
    let gpu = gpu_dirs(&w).remove(0);
    assert_eq!(
        read(gpu.join("partition_create")),
        "gpu-0000-03-00-0-1g-10gb-0"
    );
    let spec = read_cdi_spec(&spec_of(&w, &claimed));
    assert!(
        spec.to_string().contains("/dev/nvidia0"),
        "the partition's container gets its GPU's node: {spec}"
    );
    let statuses = device_statuses(&w, &claimed);
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    assert_eq!(statuses[0]["device"], "gpu-0000-03-00-0-1g-10gb-0");
    assert_eq!(statuses[0]["driver"], DRIVER);
    assert_eq!(statuses[0]["conditions"][0]["type"], "Ready");
    assert_eq!(statuses[0]["conditions"][0]["status"], "True");
    assert_eq!(statuses[0]["data"]["profile"], "1g.10gb");
    // Its device metadata file names the partition with the attributes its
    // slice publishes: its own profile and its GPU's pciBusID.
    let claim_dir = w
        .world
        .plugins()
        .join(DRIVER)
        .join("dra-device-metadata/default_mig");
    let request = std::fs::read_dir(&claim_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let bytes = std::fs::read(request.path().join("metadata.json")).unwrap();
    let object: serde_json::Value = serde_json::Deserializer::from_slice(&bytes)
        .into_iter()
        .next()
        .unwrap()
        .unwrap();
    let metadata = &object["requests"][0]["devices"][0];
    assert_eq!(metadata["name"], "gpu-0000-03-00-0-1g-10gb-0");
    assert_eq!(metadata["attributes"], partition["attributes"]);
    assert_eq!(
        metadata["attributes"]["resource.kubernetes.io/pciBusID"],
        serde_json::json!({"string": "0000:03:00.0"})
    );

    // The CDI folder emptied (a reboot): asked again, the partition's spec
    // is written again as it was, and the partition is not created twice.
    std::fs::remove_file(spec_of(&w, &claimed)).unwrap();
    std::fs::write(gpu.join("partition_create"), "").unwrap();
    assert_eq!(prepare_one(&endpoint, &claimed).await, answer);
    assert_eq!(read_cdi_spec(&spec_of(&w, &claimed)), spec);
    assert_eq!(read(gpu.join("partition_create")), "");

    // Another claim cannot take the same partition; a second partition
    // of the same GPU is fine (the scheduler counts the counters).
    let twice = w
        .api
        .put_claim(partition_claim("twice", "gpu-0000-03-00-0-1g-10gb-0"));
    let error = prepare_one(&endpoint, &twice).await.error;
    assert!(error.contains("already prepared for claim"), "{error}");
    let beside = w
        .api
        .put_claim(partition_claim("beside", "gpu-0000-03-00-0-3g-40gb-0"));
    assert_eq!(prepare_one(&endpoint, &beside).await.error, "");

    // Unprepare: removed through the guest, the status goes.
    assert_eq!(unprepare_one(&endpoint, &claimed).await, "");
    assert_eq!(
        read(gpu.join("partition_remove")),
        "-gpu-0000-03-00-0-1g-10gb-0"
    );
    assert!(device_statuses(&w, &claimed).is_empty());
    assert!(!spec_of(&w, &claimed).exists());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_that_fails_half_the_time_fails_only_its_claims_and_is_undone() {
    let w = partitions_world("fail-create = \"half\"\n").await;
    let (host, endpoint) = w.serving_count(WHOLE_AND_PARTITIONS).await;
    // The fixture's eight GPUs, as the guest names them (by PCI address).
    let gpus = [
        "0000-03-00-0",
        "0000-04-00-0",
        "0000-07-00-0",
        "0000-08-00-0",
        "0000-83-00-0",
        "0000-84-00-0",
        "0000-87-00-0",
        "0000-88-00-0",
    ];
    let claims: Vec<ResourceClaim> = gpus
        .into_iter()
        .flat_map(|gpu| (0..3).map(move |i| (gpu, i)))
        .map(|(gpu, i)| {
            w.api.put_claim(partition_claim(
                &format!("load-{gpu}-{i}"),
                &format!("gpu-{gpu}-1g-10gb-{i}"),
            ))
        })
        .collect();
    let answer = dra_client(&endpoint)
        .await
        .node_prepare_resources(wdp_kubelet_api::dra::v1::NodePrepareResourcesRequest {
            claims: claims.iter().map(claim_ref).collect(),
        })
        .await
        .unwrap()
        .into_inner();
    let (mut prepared, mut failed) = (Vec::new(), Vec::new());
    for claim in &claims {
        let result = &answer.claims[&uid(claim)];
        if result.error.is_empty() {
            prepared.push(claim);
        } else {
            assert!(
                result.error.contains("dra-prepare") && result.error.contains("gpu-"),
                "{}",
                result.error
            );
            failed.push(claim);
        }
    }
    assert!(
        !prepared.is_empty() && !failed.is_empty(),
        "half fail: {} prepared, {} failed",
        prepared.len(),
        failed.len()
    );
    for claim in &failed {
        assert!(!spec_of(&w, claim).exists(), "no spec for a failed claim");
        assert!(device_statuses(&w, claim).is_empty());
    }
    // Failed ones were undone (dra-unprepare ran): every GPU with a
    // failure saw a remove.
    let removed: usize = gpu_dirs(&w)
        .into_iter()
        .filter(|d| read(d.join("partition_remove")).starts_with("-gpu-"))
        .count();
    assert!(removed > 0, "no failed prepare was undone");
    // A failed claim's partition is free for the next attempt's claim.
    for claim in &prepared {
        assert!(spec_of(&w, claim).exists());
        assert_eq!(device_statuses(&w, claim).len(), 1);
        assert_eq!(unprepare_one(&endpoint, claim).await, "");
        assert!(device_statuses(&w, claim).is_empty());
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nonsense_layout_is_refused_by_name_and_the_last_good_slices_stay() {
    let w = partitions_world("").await;
    let (host, _endpoint) = w.serving_count(WHOLE_AND_PARTITIONS).await;
    let before = published_devices(&w.api.slices_of(NODE, DRIVER));
    // A profile that takes more memory than a GPU has, then thousands of
    // partitions: both refused at reload with the reason.
    for (extra, expected) in [
        (
            "profiles = \"huge=1:90Gi\"\n",
            "more than the 85899345920 counter set",
        ),
        (
            "slices = 5000\nprofiles = \"tiny=1:1Mi\"\n",
            "partitions, more than the 1024",
        ),
    ] {
        w.world.write_config("gpu.toml", &partitions_config(extra));
        let refused = host.reload().await.unwrap_err().to_string();
        assert!(
            refused.contains("gpu.toml")
                && refused.contains("dra-layout")
                && refused.contains(expected),
            "{refused}"
        );
        assert_eq!(published_devices(&w.api.slices_of(NODE, DRIVER)), before);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_1_35_server_counters_get_slices_of_their_own() {
    let w = partitions_world("").await;
    w.api.set_served_minor(35);
    let (host, _endpoint) = w.serving_count(WHOLE_AND_PARTITIONS).await;
    let slices = w.api.slices_of(NODE, DRIVER);
    let with_counters: Vec<&ResourceSlice> = slices
        .iter()
        .filter(|s| s.spec.shared_counters.is_some())
        .collect();
    assert!(!with_counters.is_empty());
    for slice in &with_counters {
        assert!(
            slice.spec.devices.is_none(),
            "a 1.35 server takes devices and counters in different slices"
        );
    }
    assert_eq!(published_counter_sets(&slices).len(), 8);
    let devices = published_devices(&slices);
    assert_eq!(devices.len(), WHOLE_AND_PARTITIONS);
    for slice in slices.iter().filter(|s| s.spec.devices.is_some()) {
        assert!(slice.spec.devices.as_ref().unwrap().len() <= 64);
    }
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_partitionable_devices_gets_whole_devices_only() {
    let w = partitions_world("").await;
    w.api.set_partitions_dropped(true);
    let (host, _endpoint) = w.serving_count(8).await;
    let slices = w.api.slices_of(NODE, DRIVER);
    assert!(published_counter_sets(&slices).is_empty());
    let devices = published_devices(&slices);
    assert_eq!(devices.len(), 8, "{:?}", devices.keys());
    assert!(
        devices
            .values()
            .all(|d| d.get("consumesCounters").is_none()),
        "{devices:?}"
    );
    let status = host.dra_status().await;
    assert!(
        status.values().any(|(_, s)| s.partitions_dropped),
        "{status:?}"
    );
    host.shutdown().await;
}

/// A claim allocated `device` for sharing: share `share`, `memory` of it.
fn shared_claim(name: &str, device: &str, share: &str, memory: &str) -> ResourceClaim {
    let mut claim = claim(name, DRIVER, &[device]);
    let result = &mut claim
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .and_then(|d| d.results.as_mut())
        .unwrap()[0];
    result.share_id = Some(share.to_owned());
    result.consumed_capacity = Some(BTreeMap::from([(
        "memory".to_owned(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(memory.to_owned()),
    )]));
    claim
}

/// `claim` with admin access on its result.
fn admin(mut claim: ResourceClaim) -> ResourceClaim {
    claim
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .and_then(|d| d.results.as_mut())
        .unwrap()[0]
        .admin_access = Some(true);
    claim
}

fn env_of(w: &DraWorld, claim: &ResourceClaim) -> Vec<String> {
    read_cdi_spec(&spec_of(w, claim))["containerEdits"]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_gpu_serves_claims_their_memory_admin_access_takes_nothing_and_guest_taints_are_published()
 {
    let w = partitions_world("share = \"memory\"\nnote = \"ecc-watch\"\n").await;
    let mut config = partitions_config("share = \"memory\"\nnote = \"ecc-watch\"\n");
    config = config.replace(
        "[guest-config]",
        "[hooks.allocate]\nguest = \"guests/echo.wasm\"\n[hooks.device-taints]\nguest = \"guests/taints.wasm\"\n[guest-config]",
    );
    w.world.write_config("gpu.toml", &config);
    w.world
        .install_guest(wdp_guest_artifacts::CLAIM_ECHO, "echo.wasm");
    w.world
        .install_guest(wdp_guest_artifacts::COMPAT_NEWER_PATCH, "taints.wasm");
    let (host, endpoint) = w.serving_count(WHOLE_AND_PARTITIONS).await;

    let devices = published_devices(&w.api.slices_of(NODE, DRIVER));
    let gpu = &devices[&name_of(GPU_A)];
    assert_eq!(gpu["allowMultipleAllocations"], true, "{gpu}");
    // Capacity names as the guest wrote them (a claim's request names
    // `memory`, as the scheduler matches keys exactly).
    let memory = &gpu["capacity"]["memory"];
    assert_eq!(memory["value"], "80Gi", "{gpu}");
    assert_eq!(memory["requestPolicy"]["default"], "10Gi", "{gpu}");
    // The guest's taint, on whole devices and partitions alike.
    for name in [name_of(GPU_A), "gpu-0000-03-00-0-1g-10gb-0".to_owned()] {
        let taints = &devices[&name]["taints"];
        assert_eq!(taints[0]["key"], "example.com/note", "{name}: {taints}");
        assert_eq!(taints[0]["value"], "ecc-watch");
        assert_eq!(taints[0]["effect"], "NoExecute");
    }

    // Two claims share GPU A, each with its own amount.
    let first = w.api.put_claim(shared_claim(
        "first",
        &name_of(GPU_A),
        "0b8e6a52-9d1c-4c0e-a6f4-1f2d3c4b5a61",
        "20Gi",
    ));
    let second = w.api.put_claim(shared_claim(
        "second",
        &name_of(GPU_A),
        "0b8e6a52-9d1c-4c0e-a6f4-1f2d3c4b5a62",
        "30Gi",
    ));
    assert_eq!(prepare_one(&endpoint, &first).await.error, "");
    assert_eq!(prepare_one(&endpoint, &second).await.error, "");
    let env = env_of(&w, &second);
    assert!(
        env.iter().any(|e| e.starts_with("WDP_CLAIM_DEVICE_0=")
            && e.contains("consumed=memory=30Gi")
            && e.contains("share=0b8e6a52-9d1c-4c0e-a6f4-1f2d3c4b5a62")),
        "{env:?}"
    );
    let statuses = device_statuses(&w, &second);
    assert_eq!(
        statuses[0]["shareID"], "0b8e6a52-9d1c-4c0e-a6f4-1f2d3c4b5a62",
        "{statuses:?}"
    );
    assert_eq!(statuses[0]["data"]["memory"], "30Gi", "{statuses:?}");

    // Admin access on GPU B, and a regular claim on it beside.
    let watcher = w
        .api
        .put_claim(admin(claim("watcher", DRIVER, &[&name_of(GPU_B)])));
    let user = w.api.put_claim(claim("user", DRIVER, &[&name_of(GPU_B)]));
    assert_eq!(prepare_one(&endpoint, &watcher).await.error, "");
    assert_eq!(prepare_one(&endpoint, &user).await.error, "");
    let env = env_of(&w, &watcher);
    assert!(
        env.iter().any(|e| e.contains("admin=true")),
        "the guest is told: {env:?}"
    );
    assert_eq!(
        device_statuses(&w, &watcher)[0]["data"]["adminAccess"],
        true
    );
    for claim in [&first, &second, &watcher, &user] {
        assert_eq!(unprepare_one(&endpoint, claim).await, "");
        assert!(device_statuses(&w, claim).is_empty());
    }
    host.shutdown().await;
}

/// Each counter set's GPU: the published name of the whole device that
/// consumes it.
fn set_owners(slices: &[ResourceSlice]) -> BTreeMap<String, String> {
    published_devices(slices)
        .into_iter()
        .filter(|(name, _)| !name.starts_with("gpu-"))
        .filter_map(|(name, device)| {
            let set = device["consumesCounters"][0]["counterSet"]
                .as_str()?
                .to_owned();
            Some((set, name))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unplugged_gpu_keeps_its_place_and_no_counter_set_moves_to_other_hardware() {
    let w = partitions_world("").await;
    let host = w.start().await;
    crate::common::dra_world::wait_for_socket(&w.registration_socket()).await;
    w.register().await;
    w.wait_published(WHOLE_AND_PARTITIONS).await;
    let before = set_owners(&w.api.slices_of(NODE, DRIVER));
    assert_eq!(before.len(), 8, "{before:?}");

    // Hot-unplug the third GPU (0000:07:00.0): its bus entry goes.
    let gone = "0000:07:00.0";
    std::fs::remove_file(w.world.root().join("sys/bus/pci/devices").join(gone)).unwrap();
    let gone_name = name_of(gone);
    w.api
        .wait_for_slices(
            |slices| {
                // The whole pool written again: the gone GPU tainted, and
                // every set's owner in the slices.
                let slices: Vec<ResourceSlice> = slices
                    .iter()
                    .filter(|s| s.spec.driver == DRIVER)
                    .cloned()
                    .collect();
                set_owners(&slices).len() == 8
                    && slices
                        .iter()
                        .flat_map(|s| s.spec.devices.iter().flatten())
                        .any(|d| {
                            d.name == gone_name && d.taints.as_ref().is_some_and(|t| !t.is_empty())
                        })
            },
            WAIT,
        )
        .await
        .unwrap();

    // Every set (and so every partition drawing on it) still stands on
    // the GPU it stood on.
    let after = set_owners(&w.api.slices_of(NODE, DRIVER));
    assert_eq!(after, before);
    host.shutdown().await;
}

/// Configurations `check` refuses, each with what its refusal must say:
/// a node device whose ID cannot become a DRA name (22 capital letters
/// encode to 66 characters), and the partitions guest answering its
/// layout with an error (a profile it cannot read).
fn refused_configs() -> Vec<(String, Vec<&'static str>)> {
    let head = format!(
        "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n"
    );
    vec![
        (
            format!("{head}[[nodes]]\npath = \"/dev/ABCDEFGHIJKLMNOPQRSTUV\"\n"),
            vec!["gpu.toml", "\"ABCDEFGHIJKLMNOPQRSTUV\" is not published"],
        ),
        (
            partitions_config("profiles = \"1g.10gb\"\n"),
            vec!["gpu.toml", "partitions.wasm", "dra-layout", "profiles"],
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_check_refuses_is_refused_at_start_and_at_reload_the_same_way() {
    let w = partitions_world("").await;
    w.world.write_host("/dev/ABCDEFGHIJKLMNOPQRSTUV", "");
    let host = w.start().await;
    crate::common::dra_world::wait_for_socket(&w.registration_socket()).await;
    w.register().await;
    w.wait_published(WHOLE_AND_PARTITIONS).await;
    let good = partitions_config("");

    for (config, says) in refused_configs() {
        w.world.write_config("gpu.toml", &config);
        let checked = wdp_host::check(&w.world.config(), &w.world.root())
            .unwrap_err()
            .to_string();
        let reloaded = host.reload().await.unwrap_err().to_string();
        // As before with the `refuse` setting (else the last good
        // configuration would serve, as the last_good tests show).
        let refuse = wdp_host::HostOptions {
            serve_last_good: false,
            ..w.options()
        };
        let started = wdp_host::Host::start(refuse, wdp_host::Metrics::new())
            .await
            .unwrap_err()
            .to_string();
        for (path, error) in [
            ("check", &checked),
            ("reload", &reloaded),
            ("start", &started),
        ] {
            for part in &says {
                assert!(error.contains(part), "{path}: {part}: {error}");
            }
        }
        // The last good pool stays.
        assert_eq!(
            published_devices(&w.api.slices_of(NODE, DRIVER)).len(),
            WHOLE_AND_PARTITIONS
        );
        w.world.write_config("gpu.toml", &good);
    }
    host.shutdown().await;
}

/// The fixture's GPUs with the position-naming test guest as their
/// `dra-layout` guest, walking the devices from the end when `reverse`.
fn position_config(reverse: bool) -> String {
    format!(
        "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n\
         [[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
         [hooks.dra-layout]\nguest = \"guests/position.wasm\"\n\
         [guest-config]\nreverse = \"{reverse}\"\n"
    )
}

/// The PCI address of the GPU a published device (whole or partition)
/// stands on, from its standard attribute.
fn stands_on(w: &DraWorld, device: &str) -> String {
    let devices = published_devices(&w.api.slices_of(NODE, DRIVER));
    devices[device]["attributes"]["resource.kubernetes.io/pciBusID"]["string"]
        .as_str()
        .unwrap_or_else(|| panic!("{device}: no pciBusID in {:?}", devices[device]))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_moving_a_held_name_to_other_hardware_is_refused_until_the_claim_goes() {
    let w = DraWorld::new("").await;
    w.world.write_config("gpu.toml", &position_config(false));
    w.world.install_guest(
        wdp_guest_artifacts::HOSTILE_POSITION_LAYOUT,
        "position.wasm",
    );
    // 8 GPUs, two partitions each.
    let (host, endpoint) = w.serving_count(8 * 3).await;
    let address = |dir: &PathBuf| dir.file_name().unwrap().to_str().unwrap().to_owned();
    let gpus = gpu_dirs(&w);
    let (first, last) = (address(&gpus[0]), address(&gpus[7]));
    assert_eq!(stands_on(&w, "part-0-0"), first);

    let held = w.api.put_claim(partition_claim("held", "part-0-0"));
    assert_eq!(prepare_one(&endpoint, &held).await.error, "");
    let before = published_devices(&w.api.slices_of(NODE, DRIVER));

    // Walked in reverse, every name would stand on other hardware: with
    // `part-0-0` held, the reload is refused, naming guest, hook, the name
    // and both GPUs, and the published pool stays as it was.
    w.world.write_config("gpu.toml", &position_config(true));
    let refused = host.reload().await.unwrap_err().to_string();
    for part in [
        "gpu.toml",
        "position.wasm",
        "dra-layout",
        "\"part-0-0\"",
        &first,
        &last,
    ] {
        assert!(refused.contains(part), "{part}: {refused}");
    }
    assert_eq!(published_devices(&w.api.slices_of(NODE, DRIVER)), before);
    assert_eq!(stands_on(&w, "part-0-0"), first);

    // The claim gone, nothing holds the names: the same layout applies.
    assert_eq!(unprepare_one(&endpoint, &held).await, "");
    host.reload().await.unwrap();
    w.api
        .wait_for_slices(
            |slices| {
                published_devices(slices)
                    .get("part-0-0")
                    .is_some_and(|d| d.to_string().contains(&last))
            },
            WAIT,
        )
        .await
        .unwrap();
    host.shutdown().await;
}
