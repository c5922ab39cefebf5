//! The vendor recipes of `config/examples/`: each one, against a host root
//! laid out like the hardware it is for, passes `check` and gives a
//! container every node, companion, env entry and CDI name it promises.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use wdp_kubelet_sim::{Admission, SimKubelet};

use crate::support::{Plugin, WAIT, World, run_to_end};

/// `config/examples/<recipe>` in this repository.
fn recipe_dir(recipe: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../config/examples/{recipe}"))
}

/// Copies a recipe's TOML files into the world's config directory, with
/// `edit` applied to each text. Recipes name the example guests as
/// `../../guests/<name>.wasm` (the repository's `config/guests/`); here the
/// freshly built guests go to `guests/` beside the copy.
fn install_recipe(world: &World, recipe: &str, edit: impl Fn(String) -> String) {
    let mut found = false;
    for entry in std::fs::read_dir(recipe_dir(recipe)).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            found = true;
            let text = std::fs::read_to_string(&path).unwrap();
            let text = edit(text.replace("\"../../guests/", "\"guests/"));
            let name = path.file_name().unwrap().to_str().unwrap();
            world.write_config(name, &text);
        }
    }
    assert!(found, "recipe {recipe} has no TOML files");
    for (built, name) in [
        (wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm"),
        (wdp_guest_artifacts::IOMMU_GROUP, "iommu-group.wasm"),
        (wdp_guest_artifacts::PRESENCE_HEALTH, "presence-health.wasm"),
        (wdp_guest_artifacts::GPU_PARTITIONS, "gpu-partitions.wasm"),
        (
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/polyglot/c-sriov.wasm"
            ),
            "c-sriov.wasm",
        ),
    ] {
        world.install_guest(built, name);
    }
}

/// `check` on the world's config and root: exit 0, its stdout.
fn check(world: &World) -> String {
    let (code, out, err) = run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    out
}

/// Starts the plugin with a CDI folder inside the world.
fn spawn(world: &World) -> Plugin {
    let cdi = world.tmp.path().join("cdi");
    world.spawn_with(&["--cdi-dir", cdi.to_str().unwrap()])
}

/// The CDI spec the plugin wrote for `resource`.
fn cdi_spec(world: &World, resource: &str) -> Value {
    let name = format!("wdp-{}.json", resource.replace('/', "-"));
    crate::support::read_cdi_spec(&world.tmp.path().join("cdi").join(name))
}

/// Advertised device IDs once `count` devices are listed.
async fn advertised(
    kubelet: &SimKubelet,
    plugin: &Plugin,
    resource: &str,
    count: usize,
) -> Vec<String> {
    kubelet
        .wait_registered(resource, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let devices = kubelet
        .wait_devices(resource, WAIT, |d| {
            d.len() == count && d.iter().all(|d| d.health == "Healthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    devices.into_iter().map(|d| d.id).collect()
}

/// Host paths of the device specs `Allocate` answered.
fn host_paths(admission: &Admission) -> Vec<&str> {
    admission
        .response
        .devices
        .iter()
        .map(|d| d.host_path.as_str())
        .collect()
}

fn cdi_names(admission: &Admission) -> Vec<&str> {
    admission
        .response
        .cdi_devices
        .iter()
        .map(|d| d.name.as_str())
        .collect()
}

/// Node paths of a CDI `containerEdits` object.
fn edit_paths(edits: &Value) -> Vec<&str> {
    edits["deviceNodes"]
        .as_array()
        .map(|nodes| nodes.iter().map(|n| n["path"].as_str().unwrap()).collect())
        .unwrap_or_default()
}

/// The CDI device named `id` in a spec.
fn cdi_device<'a>(spec: &'a Value, id: &str) -> &'a Value {
    spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == id)
        .unwrap_or_else(|| panic!("no CDI device {id} in {spec}"))
}

const NVIDIA: &str = "nvidia.com/gpu";
const NVIDIA_COMPANIONS: [&str; 3] = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"];
/// The driver's mig/config and mig/monitor capability nodes, which exist
/// whether or not MIG is enabled (they did on the real H100 node): present,
/// never handed out by a recipe.
const NVIDIA_MIG_ADMIN_NODES: [&str; 2] = [
    "/dev/nvidia-caps/nvidia-cap1",
    "/dev/nvidia-caps/nvidia-cap2",
];

/// GPU address → minor in the gpu-server fixture.
fn gpu_server_minors() -> HashMap<&'static str, u32> {
    [
        "0000:03:00.0",
        "0000:04:00.0",
        "0000:07:00.0",
        "0000:08:00.0",
        "0000:83:00.0",
        "0000:84:00.0",
        "0000:87:00.0",
        "0000:88:00.0",
    ]
    .into_iter()
    .zip(0..)
    .collect()
}

#[tokio::test]
async fn nvidia_recipe_gives_a_container_its_gpus_control_nodes_and_index_list() {
    let world = World::from_fixture("gpu-server");
    install_recipe(&world, "nvidia-gpu", |t| t);
    let out = check(&world);
    assert!(out.contains("8 devices (8 healthy)"), "{out}");
    for companion in NVIDIA_COMPANIONS {
        assert!(out.contains(&format!("companion {companion}")), "{out}");
    }

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let ids = advertised(&kubelet, &plugin, NVIDIA, 8).await;
    // The NVSwitch is NVIDIA's and bound to `nvidia`, but not a GPU.
    assert!(!ids.iter().any(|id| id == "0000:89:00.0"), "{ids:?}");

    let admission = kubelet.admit(NVIDIA, 2).await.unwrap();
    let minors = gpu_server_minors();
    let chosen: Vec<u32> = admission
        .devices
        .iter()
        .map(|id| minors[id.as_str()])
        .collect();
    let mut expected: Vec<String> = chosen.iter().map(|m| format!("/dev/nvidia{m}")).collect();
    expected.extend(NVIDIA_COMPANIONS.iter().map(|c| c.to_string()));
    let mut paths = host_paths(&admission);
    paths.sort_unstable();
    expected.sort_unstable();
    assert_eq!(paths, expected);
    let index_list: Vec<String> = chosen.iter().map(u32::to_string).collect();
    assert_eq!(
        admission.response.envs.get("NVIDIA_VISIBLE_DEVICES"),
        Some(&index_list.join(","))
    );
    let names: Vec<String> = admission
        .devices
        .iter()
        .map(|id| format!("{NVIDIA}={id}"))
        .collect();
    assert_eq!(cdi_names(&admission), names);

    // The CDI spec those names resolve to: each GPU's node, and for every
    // container the companions and the driver capabilities.
    let spec = cdi_spec(&world, NVIDIA);
    assert_eq!(spec["kind"], NVIDIA);
    assert_eq!(spec["devices"].as_array().unwrap().len(), 8);
    for (id, minor) in admission.devices.iter().zip(&chosen) {
        let device = cdi_device(&spec, id);
        assert_eq!(
            edit_paths(&device["containerEdits"]),
            [format!("/dev/nvidia{minor}")]
        );
    }
    assert_eq!(edit_paths(&spec["containerEdits"]), NVIDIA_COMPANIONS);
    assert_eq!(
        spec["containerEdits"]["env"][0],
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
    );
}

/// The recorded H100 VM (`wasm-device-plugin record`, kept in
/// `tests/fixtures/real-nodes/`), unpacked, with the nodes the recording
/// lacks added as fixture nodes.
fn h100_world() -> World {
    let world = World::new();
    let tarball =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real-nodes/h100-vm.tgz");
    assert!(tarball.exists(), "{} is missing", tarball.display());
    let status = std::process::Command::new("tar")
        .arg("xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(world.root())
        .arg("--strip-components=1")
        .status()
        .unwrap();
    assert!(status.success());
    for node in NVIDIA_COMPANIONS.iter().chain(&NVIDIA_MIG_ADMIN_NODES) {
        world.add_node(node);
    }
    world
}

#[tokio::test]
async fn nvidia_recipe_on_the_recorded_h100_names_the_gpu_by_uuid() {
    let world = h100_world();
    install_recipe(&world, "nvidia-gpu", |t| {
        t.replace("visible-devices = \"index\"", "visible-devices = \"uuid\"")
    });
    let out = check(&world);
    assert!(out.contains("(1 healthy)"), "{out}");

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let ids = advertised(&kubelet, &plugin, NVIDIA, 1).await;
    assert_eq!(ids, ["0000:00:06.0"]);
    let admission = kubelet.admit(NVIDIA, 1).await.unwrap();
    let mut expected = vec!["/dev/nvidia0"];
    expected.extend(NVIDIA_COMPANIONS);
    assert_eq!(host_paths(&admission), expected);
    assert_eq!(
        admission
            .response
            .envs
            .get("NVIDIA_VISIBLE_DEVICES")
            .map(String::as_str),
        Some("GPU-be34234d-8860-3341-740e-a6cf83a7133f")
    );
    assert_eq!(cdi_names(&admission), ["nvidia.com/gpu=0000:00:06.0"]);
    let spec = cdi_spec(&world, NVIDIA);
    assert_eq!(
        edit_paths(&cdi_device(&spec, "0000:00:06.0")["containerEdits"]),
        ["/dev/nvidia0"]
    );
    assert_eq!(edit_paths(&spec["containerEdits"]), NVIDIA_COMPANIONS);

    // The MIG capability nodes are on the node, but neither the answer nor
    // the CDI spec carries them.
    let spec_text = spec.to_string();
    for cap in NVIDIA_MIG_ADMIN_NODES {
        assert!(!spec_text.contains(cap), "{spec_text}");
    }
    let out = check(&world);
    assert!(!out.contains("nvidia-cap"), "{out}");
}

/// Admits `count` devices and checks the container's nodes (sorted), the
/// env list `env` (the IDs, in the order allocated) and the CDI names.
async fn admit_and_check(
    kubelet: &SimKubelet,
    resource: &str,
    count: usize,
    env: &str,
    nodes_of: impl Fn(&str) -> Vec<String>,
    companions: &[&str],
) -> Admission {
    let admission = kubelet.admit(resource, count).await.unwrap();
    let mut expected: Vec<String> = admission
        .devices
        .iter()
        .flat_map(|id| nodes_of(id))
        .collect();
    expected.extend(companions.iter().map(|c| c.to_string()));
    expected.sort_unstable();
    expected.dedup();
    let mut paths = host_paths(&admission);
    paths.sort_unstable();
    assert_eq!(paths, expected, "devices {:?}", admission.devices);
    assert_eq!(
        admission.response.envs.get(env),
        Some(&admission.devices.join(",")),
        "{:?}",
        admission.response.envs
    );
    let names: Vec<String> = admission
        .devices
        .iter()
        .map(|id| format!("{resource}={id}"))
        .collect();
    assert_eq!(cdi_names(&admission), names);
    admission
}

/// Every advertised device's CDI entry holds exactly its own nodes, and
/// the spec's common edits exactly the companions.
fn check_cdi_spec(
    world: &World,
    resource: &str,
    ids: &[String],
    nodes_of: impl Fn(&str) -> Vec<String>,
    companions: &[&str],
) {
    let spec = cdi_spec(world, resource);
    assert_eq!(spec["kind"], resource);
    assert_eq!(spec["devices"].as_array().unwrap().len(), ids.len());
    for id in ids {
        let mut paths = edit_paths(&cdi_device(&spec, id)["containerEdits"]);
        paths.sort_unstable();
        assert_eq!(paths, nodes_of(id), "CDI device {id}");
    }
    assert_eq!(edit_paths(&spec["containerEdits"]), companions);
}

const AMD: &str = "amd.com/gpu";

fn amd_nodes(id: &str) -> Vec<String> {
    match id {
        "0000:0c:00.0" => vec!["/dev/dri/card1".into(), "/dev/dri/renderD128".into()],
        "0000:8c:00.0" => vec!["/dev/dri/card2".into(), "/dev/dri/renderD129".into()],
        other => panic!("unexpected AMD device {other}"),
    }
}

#[tokio::test]
async fn amd_recipe_gives_a_container_kfd_and_its_gpus_drm_nodes() {
    let world = World::from_fixture("amd-gpu");
    install_recipe(&world, "amd-gpu", |t| t);
    let out = check(&world);
    assert!(out.contains("2 devices (2 healthy)"), "{out}");
    assert!(out.contains("companion /dev/kfd"), "{out}");

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let mut ids = advertised(&kubelet, &plugin, AMD, 2).await;
    ids.sort();
    // The BMC's VGA function (card0) is not an AMD GPU.
    assert_eq!(ids, ["0000:0c:00.0", "0000:8c:00.0"]);
    check_cdi_spec(&world, AMD, &ids, amd_nodes, &["/dev/kfd"]);
    admit_and_check(
        &kubelet,
        AMD,
        1,
        "AMD_VISIBLE_DEVICES",
        amd_nodes,
        &["/dev/kfd"],
    )
    .await;
    admit_and_check(
        &kubelet,
        AMD,
        1,
        "AMD_VISIBLE_DEVICES",
        amd_nodes,
        &["/dev/kfd"],
    )
    .await;

    // Without /dev/kfd (amdgpu loaded without KFD) no container could
    // compute: every GPU turns Unhealthy, saying why.
    world.remove_node("/dev/kfd");
    let (code, out, err) = run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    let all = format!("{out}{err}");
    assert!(
        all.contains("companion node /dev/kfd is missing"),
        "{code} {all}"
    );
}

const INTEL: &str = "gpu.intel.com/i915";

fn intel_nodes(id: &str) -> Vec<String> {
    match id {
        "0000:4f:00.0" => vec!["/dev/dri/card0".into(), "/dev/dri/renderD128".into()],
        "0000:cc:00.0" => vec!["/dev/dri/card1".into(), "/dev/dri/renderD129".into()],
        other => panic!("unexpected Intel device {other}"),
    }
}

#[tokio::test]
async fn intel_recipe_gives_a_container_its_gpus_card_and_render_nodes() {
    let world = World::from_fixture("intel-gpu");
    install_recipe(&world, "intel-gpu", |t| t);
    let out = check(&world);
    assert!(out.contains("2 devices (2 healthy)"), "{out}");

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let mut ids = advertised(&kubelet, &plugin, INTEL, 2).await;
    ids.sort();
    // The PCIe switch ports on the card are Intel's too, but not GPUs.
    assert_eq!(ids, ["0000:4f:00.0", "0000:cc:00.0"]);
    check_cdi_spec(&world, INTEL, &ids, intel_nodes, &[]);
    admit_and_check(
        &kubelet,
        INTEL,
        2,
        "INTEL_VISIBLE_DEVICES",
        intel_nodes,
        &[],
    )
    .await;
}

const VFIO: &str = "example.com/vfio";

fn vfio_nodes(id: &str) -> Vec<String> {
    let group = id.strip_prefix("iommu-group-").expect("iommu-group-<n>");
    vec![format!("/dev/vfio/{group}")]
}

#[tokio::test]
async fn vfio_recipe_hands_out_whole_iommu_groups_with_the_container_node() {
    let world = World::from_fixture("vfio-host");
    install_recipe(&world, "vfio", |t| t);
    let out = check(&world);
    assert!(out.contains("2 devices (2 healthy)"), "{out}");
    assert!(out.contains("companion /dev/vfio/vfio"), "{out}");

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let ids = advertised(&kubelet, &plugin, VFIO, 2).await;
    // The GPU and its audio function share group 30: one device. The
    // X710 PF on i40e is not passthrough material.
    assert_eq!(ids, ["iommu-group-30", "iommu-group-33"]);
    check_cdi_spec(&world, VFIO, &ids, vfio_nodes, &["/dev/vfio/vfio"]);
    let admission = admit_and_check(
        &kubelet,
        VFIO,
        2,
        "VFIO_VISIBLE_DEVICES",
        vfio_nodes,
        &["/dev/vfio/vfio"],
    )
    .await;
    // What KubeVirt's device-plugin path reads: every function of the
    // groups granted (the GPU and its audio function are group 30).
    let mut addresses: Vec<&str> = admission.response.envs["PCI_RESOURCE_EXAMPLE_COM_VFIO"]
        .split(',')
        .collect();
    addresses.sort_unstable();
    assert_eq!(addresses, ["0000:17:00.0", "0000:17:00.1", "0000:3d:02.0"]);

    // A function of the group leaving vfio-pci makes the group Unhealthy:
    // a VM could no longer take it whole.
    std::fs::remove_file(
        world
            .root()
            .join("sys/devices/pci0000:16/0000:16:00.0/0000:17:00.1/driver"),
    )
    .unwrap();
    kubelet
        .wait_devices(VFIO, WAIT, |d| {
            d.iter()
                .any(|d| d.id == "iommu-group-30" && d.health == "Unhealthy")
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
}

const SRIOV: &str = "example.com/cx6dx-vf";

fn sriov_nodes(id: &str) -> Vec<String> {
    match id {
        "0000:3b:00.2" => vec!["/dev/infiniband/uverbs1".into()],
        "0000:3b:00.3" => vec!["/dev/infiniband/uverbs2".into()],
        other => panic!("unexpected SR-IOV device {other}"),
    }
}

#[tokio::test]
async fn sriov_recipe_advertises_vfs_never_the_pf() {
    let world = World::from_fixture("sriov-nic");
    install_recipe(&world, "sriov", |t| t);
    let out = check(&world);
    assert!(out.contains("2 devices (2 healthy)"), "{out}");
    assert!(
        !out.contains("0000:3b:00.0") && !out.contains("0000:3b:00.1"),
        "{out}"
    );

    let kubelet = world.kubelet().await;
    let plugin = spawn(&world);
    let mut ids = advertised(&kubelet, &plugin, SRIOV, 2).await;
    ids.sort();
    assert_eq!(ids, ["0000:3b:00.2", "0000:3b:00.3"]);
    check_cdi_spec(&world, SRIOV, &ids, sriov_nodes, &[]);
    admit_and_check(
        &kubelet,
        SRIOV,
        2,
        "SRIOV_VISIBLE_DEVICES",
        sriov_nodes,
        &[],
    )
    .await;

    // With the RDMA CM node present (rdma_ucm loaded) it goes along.
    world.add_node("/dev/infiniband/rdma_cm");
    let out = check(&world);
    assert!(out.contains("companion /dev/infiniband/rdma_cm"), "{out}");
}

/// Every recipe as shipped, untouched, in the repository's layout
/// (`config/examples/<name>/` beside `config/guests/`), passes `check`
/// against its fixture.
#[test]
fn every_recipe_as_shipped_passes_check_on_its_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let guests = tmp.path().join("config/guests");
    std::fs::create_dir_all(&guests).unwrap();
    for (built, name) in [
        (wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm"),
        (wdp_guest_artifacts::IOMMU_GROUP, "iommu-group.wasm"),
        (wdp_guest_artifacts::PRESENCE_HEALTH, "presence-health.wasm"),
        (wdp_guest_artifacts::GPU_PARTITIONS, "gpu-partitions.wasm"),
        (
            concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../target/polyglot/c-sriov.wasm"
            ),
            "c-sriov.wasm",
        ),
    ] {
        std::fs::copy(built, guests.join(name)).unwrap();
    }
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let mut shipped: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/examples"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    shipped.sort();
    assert_eq!(
        shipped,
        [
            "amd-gpu",
            "gpu-partitions-dra",
            "intel-gpu",
            "nvidia-gpu",
            "sriov",
            "sriov-dra",
            "vfio",
            "vfio-dra"
        ]
    );
    for (recipe, fixture, devices) in [
        ("nvidia-gpu", "gpu-server", 8),
        ("amd-gpu", "amd-gpu", 2),
        ("intel-gpu", "intel-gpu", 2),
        ("vfio", "vfio-host", 2),
        ("sriov", "sriov-nic", 2),
        ("gpu-partitions-dra", "gpu-server", 8),
        ("sriov-dra", "sriov-nic", 2),
        ("vfio-dra", "gpu-server", 8),
    ] {
        let dir = tmp.path().join("config/examples").join(recipe);
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(recipe_dir(recipe)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
        }
        let (code, out, err) = run_to_end(&[
            "check",
            "--config-dir",
            dir.to_str().unwrap(),
            "--host-root",
            fixtures.join(fixture).to_str().unwrap(),
        ]);
        assert_eq!(code, 0, "{recipe}: {out}{err}");
        let summary = format!("{devices} devices ({devices} healthy)");
        assert!(out.contains(&summary), "{recipe}: {out}");
        // Counters are checked with the pool's counter sets.
        assert!(!out.contains("no counter set"), "{recipe}: {out}");
        if recipe == "gpu-partitions-dra" {
            // The standard attributes other drivers' devices line up with;
            // the GPUs' paths, four bridges deep, are too long to publish
            // and are not reported, as their roots are published.
            assert!(
                out.contains("device 0000:83:00.0 -> DRA name 0000-3a83-3a00-2e0 (numaNode=1, pciBusID=0000:83:00.0, pcieRoot=pci0000:80)"),
                "{out}"
            );
            assert!(!out.contains("pci.path"), "{out}");
        }
        if recipe == "vfio-dra" {
            // What a bind would do, device by device: this fixture's node
            // has no vfio-pci loaded, so the host says it would refuse.
            assert!(
                out.contains("passthrough 0000:03:00.0: the host would refuse to bind it now: 0000:03:00.0 (IOMMU group 13): driver vfio-pci is not loaded"),
                "{out}"
            );
        }
    }
}

/// `test` on the GPU partitions recipe shows the layout as it will be
/// published: counter sets, what whole GPUs and partitions consume, and
/// the slices it takes on each served version.
#[test]
fn test_prints_the_partitions_recipes_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let guests = tmp.path().join("config/guests");
    std::fs::create_dir_all(&guests).unwrap();
    std::fs::copy(
        wdp_guest_artifacts::GPU_PARTITIONS,
        guests.join("gpu-partitions.wasm"),
    )
    .unwrap();
    let dir = tmp.path().join("config/examples/gpu-partitions-dra");
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(recipe_dir("gpu-partitions-dra")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/gpu-server");
    let (code, out, err) = run_to_end(&[
        "test",
        "--config-dir",
        dir.to_str().unwrap(),
        "--host-root",
        fixture.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "DRA driver gpu.example.com (registers through the kubelet's plugin watcher)",
        "counter set gpu-0000-03-00-0: memory=80Gi slices=7",
        "device 0000-3a03-3a00-2e0: consumes memory=80Gi slices=7 from gpu-0000-03-00-0",
        "device gpu-0000-88-00-0-3g-40gb-1: partition of 0000-3a88-3a00-2e0; consumes memory=40Gi slices=3 from gpu-0000-88-00-0",
        "published on a 1.34 server: 1 slices",
        "published on a 1.35+ server: 3 slices",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert!(!out.contains("registration: kubelet"), "{out}");
}
