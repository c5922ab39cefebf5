//! CDI specs: written per resource with every advertised device, its nodes
//! and the resource's companions and edits; named in `Allocate`; removed
//! with the resource; kept on shutdown.

use serde_json::Value;

use crate::support::{WAIT, World};

const GPU: &str = "e2e.example.com/gpu";
const FUSE: &str = "e2e.example.com/fuse";

fn read_spec(world: &World, name: &str) -> Value {
    crate::support::read_cdi_spec(&world.tmp.path().join("cdi").join(name))
}

#[tokio::test]
async fn cdi_specs_follow_the_resources_and_name_what_allocate_hands_out() {
    let world = World::from_fixture("gpu-server");
    world.add_node("/dev/fuse");
    world.write_config("host.toml", "version = 1\nreload-debounce-ms = 20\n");
    world.write_config(
        "gpu.toml",
        &format!(
            r#"version = 1
resource = "{GPU}"
cdi = "both"
[[pci]]
vendor = "0x10de"
class = "0x0302"
[[companion-nodes]]
path = "/dev/nvidiactl"
[cdi-edits]
env = ["NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
[[cdi-edits.mounts]]
host-path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
container-path = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
options = ["ro", "nosuid", "nodev", "bind"]
[[cdi-edits.hooks]]
hook-name = "createContainer"
path = "/usr/bin/nvidia-cdi-hook"
args = ["nvidia-cdi-hook", "update-ldcache"]
"#
        ),
    );
    world.write_config(
        "fuse.toml",
        &format!("version = 1\nresource = \"{FUSE}\"\ncdi = \"names\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 2\n"),
    );
    let cdi_dir = world.tmp.path().join("cdi");
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn_with(&["--cdi-dir", cdi_dir.to_str().unwrap()]);
    let record = kubelet
        .wait_registered(GPU, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();

    // One CDI device per advertised ID, with its node; companions and
    // edits for every container; the lowest version that fits (device
    // names that start with a digit need 0.5.0).
    let spec = read_spec(&world, "wdp-e2e.example.com-gpu.json");
    assert_eq!(spec["cdiVersion"], "0.5.0");
    assert_eq!(spec["kind"], GPU);
    let names: Vec<&str> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let advertised: Vec<&str> = record.devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(names, advertised);
    let first = &spec["devices"][0]["containerEdits"]["deviceNodes"][0];
    assert!(
        first["path"].as_str().unwrap().starts_with("/dev/nvidia"),
        "{first}"
    );
    let edits = &spec["containerEdits"];
    assert_eq!(edits["deviceNodes"][0]["path"], "/dev/nvidiactl");
    assert_eq!(
        edits["env"][0],
        "NVIDIA_DRIVER_CAPABILITIES=compute,utility"
    );
    assert_eq!(edits["mounts"][0]["options"][0], "ro");
    assert_eq!(edits["hooks"][0]["hookName"], "createContainer");
    let fuse = read_spec(&world, "wdp-e2e.example.com-fuse.json");
    assert_eq!(fuse["cdiVersion"], "0.3.0");
    assert_eq!(fuse["devices"].as_array().unwrap().len(), 2);

    // Allocate names the CDI devices: with device specs (`both`) or alone
    // (`names`).
    let gpu = kubelet.admit(GPU, 1).await.unwrap();
    assert_eq!(
        gpu.response.cdi_devices[0].name,
        format!("{GPU}={}", gpu.devices[0])
    );
    assert!(!gpu.response.devices.is_empty());
    let fuse = kubelet.admit(FUSE, 1).await.unwrap();
    assert_eq!(
        fuse.response.cdi_devices[0].name,
        format!("{FUSE}={}", fuse.devices[0])
    );
    assert!(fuse.response.devices.is_empty());

    // A resource that leaves the config takes its spec with it.
    std::fs::remove_file(world.config().join("fuse.toml")).unwrap();
    plugin.wait_for_log("configuration reloaded").await;
    assert!(!cdi_dir.join("wdp-e2e.example.com-fuse.json").exists());

    // Shutdown keeps the spec: restarted containers still resolve names.
    assert!(plugin.terminate().await.success());
    assert!(cdi_dir.join("wdp-e2e.example.com-gpu.json").exists());
}

#[tokio::test]
async fn check_refuses_names_cdi_forbids_and_an_unusable_cdi_dir_stops_run() {
    let world = World::new();
    world.add_node("/dev/odd-");
    world.write_config(
        "odd.toml",
        "version = 1\nresource = \"e2e.example.com/odd\"\ncdi = \"both\"\n[[nodes]]\npath = \"/dev/odd-\"\n",
    );
    let (code, out, err) = crate::support::run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("odd.toml") && err.contains("CDI device name"),
        "{err}"
    );

    // A CDI folder that cannot be created: `check --cdi-dir` names it, and
    // `run` stops at once, by name.
    world.write_config(
        "odd.toml",
        "version = 1\nresource = \"e2e.example.com/odd\"\ncdi = \"both\"\n[[nodes]]\npath = \"/dev/fuse\"\n",
    );
    world.add_node("/dev/fuse");
    let blocked = world.config().join("odd.toml").join("cdi");
    let (code, out, err) = crate::support::run_to_end(&[
        "check",
        "--config-dir",
        world.config().to_str().unwrap(),
        "--host-root",
        world.root().to_str().unwrap(),
        "--cdi-dir",
        blocked.to_str().unwrap(),
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains("--cdi-dir") && err.contains("odd.toml"),
        "{err}"
    );
    let mut plugin = world.spawn_with(&["--cdi-dir", blocked.to_str().unwrap()]);
    let status = plugin.wait(WAIT).await.expect("run did not stop");
    assert!(!status.success());
    let log = plugin.log();
    assert!(
        log.contains("CDI directory") && log.contains("--cdi-dir"),
        "{log}"
    );
}
