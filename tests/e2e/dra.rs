//! DRA mode: a resource file with `api = "dra"` served by the real binary
//! as a DRA driver, against the fake API server (ResourceSlices, claims)
//! and the simulated kubelet's DRA side (registration, prepare/unprepare,
//! the health stream), with a fixture tree of device nodes.

use std::path::PathBuf;
use std::sync::Arc;

use wdp_fake_apiserver::{FakeApiServer, ResourceClaim, ResourceSlice};
use wdp_kubelet_sim::dra::DeviceHealth;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet};

use crate::support::{Plugin, World, binary, free_addr, http_get, name_of, read_cdi_spec};

const RESOURCE: &str = "e2e.example.com/hot";
const DRIVER: &str = "hot.e2e.example.com";
pub(crate) const NODE: &str = "node-e2e";
/// The fixture's device nodes (one DRA device each) and the companion.
const DEVICES: [&str; 2] = ["/dev/hot0", "/dev/hot1"];
const COMPANION: &str = "/dev/ctl0";
/// The machine running these tests is loaded: a generous bound.
const LONG: std::time::Duration = std::time::Duration::from_secs(30);

/// A world with the fixture nodes and a DRA resource file, the fake API
/// server and the simulated kubelet (which wipes the node's slices when it
/// starts, as the kubelet does).
pub(crate) struct Dra {
    pub(crate) world: World,
    pub(crate) api: Arc<FakeApiServer>,
    kubelet: SimDraKubelet,
}

impl Dra {
    async fn new(extra_config: &[(&str, &str)]) -> Self {
        let world = World::new();
        for node in DEVICES.iter().chain([&COMPANION]) {
            world.add_node(node);
        }
        world.write_config(
            "hot.toml",
            &format!(
                "version = 1\nresource = \"{RESOURCE}\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n[[nodes]]\npath = \"/dev/hot*\"\n[[companion-nodes]]\npath = \"{COMPANION}\"\n"
            ),
        );
        Self::in_world(world, extra_config).await
    }

    /// `world` (its host root and resource files made) with `host.toml`
    /// and `extra_config` written, the fake API server holding node
    /// [`NODE`] and the simulated DRA kubelet.
    pub(crate) async fn in_world(world: World, extra_config: &[(&str, &str)]) -> Self {
        world.write_config(
            "host.toml",
            "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
        );
        for (name, text) in extra_config {
            world.write_config(name, text);
        }
        let api = Arc::new(FakeApiServer::start().await.unwrap());
        // The node object, as in any cluster. (It also moves the fake
        // server's resourceVersion off "0": a list answered at "0" makes
        // kube's watcher watch "from now", missing what happens between
        // its list and its watch.)
        api.put_node(
            serde_json::from_value(serde_json::json!({"metadata": {"name": NODE}})).unwrap(),
        );
        api.write_kubeconfig(&world.tmp.path().join("kubeconfig"))
            .unwrap();
        let wiped = api.clone();
        let kubelet = SimDraKubelet::start(
            world.registry(),
            DraSimOptions {
                wipe: Some(Arc::new(move || {
                    wiped.wipe_node_slices(NODE, None);
                })),
                ..DraSimOptions::default()
            },
        )
        .await
        .unwrap();
        Self {
            world,
            api,
            kubelet,
        }
    }

    fn cdi_dir(&self) -> PathBuf {
        self.world.tmp.path().join("cdi")
    }

    pub(crate) fn spawn(&self, extra: &[&str]) -> Plugin {
        let args = run_args(self, &self.world.config());
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend_from_slice(extra);
        Plugin::spawn(&args, self.world.tmp.path())
    }

    /// Waits until the driver's slices list exactly `count` devices.
    async fn published(&self, plugin: &Plugin, count: usize) -> Vec<ResourceSlice> {
        self.api
            .wait_for_slices(|s| device_count(s) == count, LONG)
            .await
            .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", e.last, plugin.log()));
        self.api.slices_of(NODE, DRIVER)
    }

    /// Waits for the `count`th registration of the driver since the
    /// simulated kubelet (re)started.
    async fn registered(&self, plugin: &Plugin, count: u64) {
        self.kubelet
            .wait_for("driver registration", LONG, |s| {
                s.drivers.contains_key(DRIVER)
                    && s.registrations.get(DRIVER).is_some_and(|&n| n >= count)
            })
            .await
            .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", self.kubelet.state(), plugin.log()));
    }
}

/// The arguments of `run` reading `config_dir`, with the node's folders
/// every instance shares.
fn run_args(dra: &Dra, config_dir: &std::path::Path) -> Vec<String> {
    let tmp = dra.world.tmp.path();
    let path = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    [
        "run".to_owned(),
        "--config-dir".to_owned(),
        path(config_dir.to_owned()),
        "--device-plugin-dir".to_owned(),
        path(dra.world.plugins()),
        "--host-root".to_owned(),
        path(dra.world.root()),
        "--plugins-registry-dir".to_owned(),
        path(dra.world.registry()),
        "--cdi-dir".to_owned(),
        path(dra.cdi_dir()),
        "--plugins-dir".to_owned(),
        path(tmp.join("kubelet-plugins")),
        "--state-dir".to_owned(),
        path(tmp.join("state")),
        "--kubeconfig".to_owned(),
        path(tmp.join("kubeconfig")),
        "--node-name".to_owned(),
        NODE.to_owned(),
    ]
    .into()
}

/// Starts an instance of the host with its own ID (a pod of a rolling
/// update) reading `config_dir`, sharing the node's folders with the others.
fn spawn_instance(dra: &Dra, config_dir: &std::path::Path, id: &str) -> Plugin {
    spawn_release(dra, binary(), config_dir, id)
}

/// As [`spawn_instance`], running `program` (another release's binary).
fn spawn_release(dra: &Dra, program: &str, config_dir: &std::path::Path, id: &str) -> Plugin {
    let mut args = run_args(dra, config_dir);
    args.extend(["--instance-id".to_owned(), id.to_owned()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Plugin::spawn_binary(program, &[], &args, dra.world.tmp.path())
}

/// How many devices the driver's slices for the node list.
fn device_count(slices: &[ResourceSlice]) -> usize {
    slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER && s.spec.node_name.as_deref() == Some(NODE))
        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
        .sum()
}

fn device_names(slices: &[ResourceSlice]) -> Vec<String> {
    let mut names: Vec<String> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect();
    names.sort();
    names
}

/// A claim allocated the devices of `nodes` in pool `NODE`, stored in the
/// API server; returns its reference.
fn put_claim(api: &FakeApiServer, name: &str, nodes: &[&str]) -> ClaimRef {
    let devices: Vec<String> = nodes.iter().map(|node| name_of(node)).collect();
    let devices: Vec<&str> = devices.iter().map(String::as_str).collect();
    put_claim_of(api, name, &devices)
}

/// A claim allocated the DRA devices `devices` (published names) in pool
/// `NODE`, stored in the API server; returns its reference.
fn put_claim_of(api: &FakeApiServer, name: &str, devices: &[&str]) -> ClaimRef {
    let results: Vec<serde_json::Value> = devices
        .iter()
        .map(|device| {
            serde_json::json!({
                "request": "hot", "driver": DRIVER, "pool": NODE, "device": device
            })
        })
        .collect();
    let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "hot", "exactly": {"deviceClassName": "hot"}}]}},
        "status": {"allocation": {"devices": {"results": results}}}
    }))
    .unwrap();
    let stored = api.put_claim(claim);
    ClaimRef::new("default", name, stored.metadata.uid.as_deref().unwrap())
}

/// Prepares `claim`; returns its devices' CDI IDs, sorted, after checking
/// that the device metadata mount of its one request (KEP-5304) is
/// answered with them.
async fn prepare(dra: &Dra, plugin: &Plugin, claim: &ClaimRef) -> Vec<String> {
    let (ids, mounts) = prepare_split(dra, plugin, claim).await;
    let mount = format!("{RESOURCE}={}_metadata_hot", claim.uid);
    assert_eq!(mounts, [mount], "{ids:?}\n{}", plugin.log());
    ids
}

/// Prepares `claim`; returns its devices' CDI IDs, sorted, and apart the
/// device metadata mounts answered with them (none from a release before
/// device metadata, or for a claim it prepared).
async fn prepare_split(dra: &Dra, plugin: &Plugin, claim: &ClaimRef) -> (Vec<String>, Vec<String>) {
    let outcome = dra
        .kubelet
        .prepare(DRIVER, std::slice::from_ref(claim))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert_eq!(outcome.service, "v1.DRAPlugin");
    let devices = outcome.claims[&claim.uid]
        .clone()
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let (mounts, mut ids): (Vec<String>, Vec<String>) = devices
        .iter()
        .inspect(|d| assert_eq!(d.pool_name, NODE))
        .flat_map(|d| d.cdi_device_ids.clone())
        .partition(|id| id.contains(&format!("={}_metadata_", claim.uid)));
    ids.sort();
    (ids, mounts)
}

async fn unprepare(dra: &Dra, claim: &ClaimRef) {
    let outcome = dra
        .kubelet
        .unprepare(DRIVER, std::slice::from_ref(claim))
        .await
        .unwrap();
    assert_eq!(outcome.claims[&claim.uid], Ok(()));
}

fn spec_path(dra: &Dra, claim: &ClaimRef) -> PathBuf {
    dra.cdi_dir()
        .join(format!("wdp-e2e.example.com-hot_{}.json", claim.uid))
}

#[tokio::test]
async fn dra_driver_registers_and_publishes_one_device_per_node() {
    let dra = Dra::new(&[]).await;
    let plugin = dra.spawn(&[]);
    dra.registered(&plugin, 1).await;
    let record = dra.kubelet.driver(DRIVER).unwrap();
    assert_eq!(record.info.r#type, "DRAPlugin");
    assert_eq!(record.chosen_service, "v1.DRAPlugin");
    assert_eq!(
        PathBuf::from(&record.info.endpoint),
        dra.world
            .tmp
            .path()
            .join("kubelet-plugins")
            .join(DRIVER)
            .join("dra.sock")
    );
    assert_eq!(
        record.socket,
        dra.world.registry().join(format!("{DRIVER}-reg.sock"))
    );

    let slices = dra.published(&plugin, DEVICES.len()).await;
    let mut expected: Vec<String> = DEVICES.iter().map(|n| name_of(n)).collect();
    expected.sort();
    assert_eq!(device_names(&slices), expected);
    for slice in &slices {
        assert_eq!(slice.spec.pool.name, NODE);
        assert_eq!(slice.spec.node_name.as_deref(), Some(NODE));
    }
    // No device-plugin socket for a DRA resource.
    assert!(dra.world.plugin_sockets().is_empty());
}

#[tokio::test]
async fn dra_prepare_writes_a_cdi_spec_idempotently_and_unprepare_removes_it() {
    let dra = Dra::new(&[]).await;
    let plugin = dra.spawn(&[]);
    dra.registered(&plugin, 1).await;
    dra.published(&plugin, DEVICES.len()).await;

    let claim = put_claim(&dra.api, "one", &[DEVICES[0]]);
    let ids = prepare(&dra, &plugin, &claim).await;
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert!(ids[0].starts_with(&format!("{RESOURCE}=")), "{ids:?}");
    let path = spec_path(&dra, &claim);
    let spec = read_cdi_spec(&path);
    assert_eq!(spec["kind"], RESOURCE);
    let text = spec.to_string();
    assert!(text.contains(DEVICES[0]), "{text}");
    assert!(text.contains(COMPANION), "{text}");
    assert!(!text.contains(DEVICES[1]), "{text}");
    let cdi_names: Vec<&str> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    let name = ids[0].split_once('=').unwrap().1;
    assert!(cdi_names.contains(&name), "{name} not in {cdi_names:?}");
    // The spec mounts the claim's device metadata file (KEP-5304), which
    // names the claim, until the unprepare.
    let mount = &spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == format!("{}_metadata_hot", claim.uid))
        .unwrap_or_else(|| panic!("no metadata mount in {spec}"))["containerEdits"]["mounts"][0];
    assert_eq!(
        mount["containerPath"],
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/one/hot/hot.e2e.example.com-metadata.json"
    );
    let metadata = PathBuf::from(mount["hostPath"].as_str().unwrap());
    let text = std::fs::read_to_string(&metadata).unwrap();
    assert!(text.contains(&claim.uid), "{text}");

    // The kubelet may call again: the same answer.
    assert_eq!(prepare(&dra, &plugin, &claim).await, ids);
    unprepare(&dra, &claim).await;
    assert!(!path.exists(), "unprepare leaves {}", path.display());
    assert!(
        !metadata.exists(),
        "unprepare leaves {}",
        metadata.display()
    );
    // Unprepare is idempotent too.
    unprepare(&dra, &claim).await;
}

#[tokio::test]
async fn dra_prepare_is_idempotent_across_a_host_restart() {
    let dra = Dra::new(&[]).await;
    let mut plugin = dra.spawn(&[]);
    dra.registered(&plugin, 1).await;
    dra.published(&plugin, DEVICES.len()).await;
    let claim = put_claim(&dra.api, "both", &DEVICES);
    let ids = prepare(&dra, &plugin, &claim).await;
    assert_eq!(ids.len(), DEVICES.len(), "{ids:?}");
    let path = spec_path(&dra, &claim);

    assert!(plugin.terminate().await.success(), "{}", plugin.log());
    assert!(path.exists(), "a clean shutdown keeps the claim's spec");
    let plugin = dra.spawn(&[]);
    dra.registered(&plugin, 2).await;
    assert_eq!(prepare(&dra, &plugin, &claim).await, ids);
    read_cdi_spec(&path);

    // The claim is gone from the API server: unprepare still succeeds,
    // from the checkpoint.
    assert!(dra.api.delete_claim("default", "both"));
    unprepare(&dra, &claim).await;
    assert!(!path.exists(), "unprepare leaves {}", path.display());
}

#[tokio::test]
async fn dra_kubelet_restart_reregisters_and_republishes_wiped_slices() {
    let mut dra = Dra::new(&[]).await;
    let plugin = dra.spawn(&[]);
    dra.registered(&plugin, 1).await;
    dra.published(&plugin, DEVICES.len()).await;

    dra.kubelet.restart().await.unwrap();
    assert_eq!(dra.kubelet.state().wipes, 2);
    dra.registered(&plugin, 1).await;
    let slices = dra.published(&plugin, DEVICES.len()).await;
    let mut expected: Vec<String> = DEVICES.iter().map(|n| name_of(n)).collect();
    expected.sort();
    assert_eq!(device_names(&slices), expected);
}

#[tokio::test]
async fn dra_hot_unplug_taints_the_device_and_reports_it_unhealthy() {
    let dra = Dra::new(&[]).await;
    let plugin = dra.spawn(&[]);
    dra.registered(&plugin, 1).await;
    dra.published(&plugin, DEVICES.len()).await;
    let gone = name_of(DEVICES[1]);
    let key = (NODE.to_owned(), gone.clone());
    dra.kubelet
        .wait_health(DRIVER, LONG, |r| {
            r.health.get(&key).map(|h| h.health) == Some(DeviceHealth::Healthy)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", dra.kubelet.state(), plugin.log()));

    dra.world.remove_node(DEVICES[1]);
    let taint_key = format!("{DRIVER}/unhealthy");
    let tainted = |slices: &[ResourceSlice]| -> Vec<String> {
        slices
            .iter()
            .filter(|s| s.spec.driver == DRIVER)
            .flat_map(|s| s.spec.devices.iter().flatten())
            .filter(|d| d.taints.iter().flatten().any(|t| t.key == taint_key))
            .map(|d| d.name.clone())
            .collect()
    };
    dra.api
        .wait_for_slices(|s| tainted(s) == [gone.clone()], LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", e.last, plugin.log()));
    dra.kubelet
        .wait_health(DRIVER, LONG, |r| {
            r.health.get(&key).map(|h| h.health) == Some(DeviceHealth::Unhealthy)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", dra.kubelet.state(), plugin.log()));
    let record = dra.kubelet.driver(DRIVER).unwrap();
    let healthy = (NODE.to_owned(), name_of(DEVICES[0]));
    assert_eq!(record.health[&healthy].health, DeviceHealth::Healthy);

    // It comes back: the taint goes.
    dra.world.add_node(DEVICES[1]);
    dra.api
        .wait_for_slices(|s| tainted(s).is_empty() && device_count(s) == 2, LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", e.last, plugin.log()));
}

#[tokio::test]
async fn dra_unreachable_api_server_fails_readyz_but_spares_device_plugin_resources() {
    const FUSE: &str = "e2e.example.com/fuse";
    let dra = Dra::new(&[(
        "fuse.toml",
        &format!("version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\n"),
    )])
    .await;
    dra.world.add_node("/dev/fuse");
    dra.api.set_refusing(true);
    let kubelet = dra.world.kubelet().await;
    let addr = free_addr();
    let plugin = dra.spawn(&["--registration", "kubelet", "--metrics-addr", &addr]);
    kubelet
        .wait_registered(FUSE, 1, LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    // Not ready, naming only the driver whose slices are not published
    // (the device-plugin resource is ready just after the kubelet records
    // its registration).
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Ok((code, body)) = http_get(&addr, "/readyz").await
            && body.contains(DRIVER)
            && !body.contains(FUSE)
        {
            assert_ne!(code, 200, "{body}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never named {DRIVER} alone\n{}",
            plugin.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(dra.api.slices_of(NODE, DRIVER).is_empty());

    // The API server answers again: slices, then ready.
    dra.api.set_refusing(false);
    dra.published(&plugin, DEVICES.len()).await;
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        let answer = http_get(&addr, "/readyz").await;
        if matches!(answer, Ok((200, _))) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never ready: {answer:?}\n{}",
            plugin.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn dra_rolling_update_runs_two_instances_side_by_side_without_a_gap() {
    let dra = Dra::new(&[]).await;
    let mut old = spawn_instance(&dra, &dra.world.config(), "pod-old");
    dra.registered(&old, 1).await;
    dra.published(&old, DEVICES.len()).await;
    let first = put_claim(&dra.api, "first", &[DEVICES[0]]);
    prepare(&dra, &old, &first).await;
    let socket = |id: &str| {
        dra.world
            .tmp
            .path()
            .join("kubelet-plugins")
            .join(DRIVER)
            .join(format!("dra-{id}.sock"))
    };
    assert_eq!(
        PathBuf::from(dra.kubelet.driver(DRIVER).unwrap().info.endpoint),
        socket("pod-old")
    );

    // The new pod starts with a new configuration (one device only) beside
    // the old one: the kubelet keeps both registered and calls the newest,
    // which publishes from now on; the old one yields without a write.
    let new_config = dra.world.tmp.path().join("config-new");
    std::fs::create_dir_all(&new_config).unwrap();
    std::fs::copy(
        dra.world.config().join("host.toml"),
        new_config.join("host.toml"),
    )
    .unwrap();
    std::fs::write(
        new_config.join("hot.toml"),
        std::fs::read_to_string(dra.world.config().join("hot.toml"))
            .unwrap()
            .replace("/dev/hot*", DEVICES[1]),
    )
    .unwrap();
    let new = spawn_instance(&dra, &new_config, "pod-new");
    dra.registered(&new, 2).await;
    let state = dra.kubelet.state();
    assert_eq!(
        PathBuf::from(&state.drivers[DRIVER].info.endpoint),
        socket("pod-new")
    );
    assert_eq!(state.standby.len(), 1, "{state:#?}");
    let slices = dra.published(&new, 1).await;
    assert_eq!(device_names(&slices), [name_of(DEVICES[1])]);
    old.wait_for_log("a newer instance of the host publishes the ResourceSlices now")
        .await;

    // New claims go to the new instance.
    let second = put_claim(&dra.api, "second", &[DEVICES[1]]);
    prepare(&dra, &new, &second).await;
    assert!(spec_path(&dra, &second).exists());

    // The old pod stops: only its registration goes, and the claim it
    // prepared is unprepared by the new one, from the shared checkpoint.
    assert!(old.terminate().await.success(), "{}", old.log());
    dra.kubelet
        .wait_for("the old instance to deregister", LONG, |s| {
            s.standby.is_empty() && s.drivers.contains_key(DRIVER)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}", dra.kubelet.state()));
    assert!(spec_path(&dra, &first).exists());
    unprepare(&dra, &first).await;
    assert!(!spec_path(&dra, &first).exists(), "{}", new.log());

    // A rollback: a pod of the old version starts again beside the new
    // one, takes the publishing over (both devices again) and unprepares
    // the claim the new one prepared; then the new pod goes.
    let mut new = new;
    let back = spawn_instance(&dra, &dra.world.config(), "pod-rollback");
    dra.registered(&back, 3).await;
    dra.published(&back, DEVICES.len()).await;
    assert!(new.terminate().await.success(), "{}", new.log());
    unprepare(&dra, &second).await;
    assert!(!spec_path(&dra, &second).exists(), "{}", back.log());

    // One publisher at any moment: the pool's device set changed exactly
    // once per handover, as every write the server accepted shows it (an
    // older instance writing its list back would add two changes).
    let both: Vec<String> = DEVICES.iter().map(|d| name_of(d)).collect();
    assert_eq!(
        dra.api.pool_history(NODE, DRIVER),
        [both.clone(), vec![name_of(DEVICES[1])], both],
        "{}\n{}",
        new.log(),
        back.log()
    );

    // Through it all the pool was replaced in place, never deleted, and
    // the kubelet refused no registration.
    let stats = dra.api.stats();
    assert_eq!(
        (stats.slice_deletes, stats.slice_collection_deletes),
        (0, 0),
        "{stats:#?}"
    );
    assert!(
        dra.kubelet.state().failures.is_empty(),
        "{:?}",
        dra.kubelet.state().failures
    );
}

/// The previous release's binary, built from its own source by
/// `tests/downgrade.sh`, which runs the test below with it.
fn previous_release() -> String {
    std::env::var("WDP_PREVIOUS_BINARY")
        .expect("WDP_PREVIOUS_BINARY names the previous release's binary: run tests/downgrade.sh")
}

/// Files of the node's DRA state folder that a host set aside as unreadable.
fn set_aside(dra: &Dra) -> Vec<String> {
    std::fs::read_dir(dra.world.tmp.path().join("state/dra"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".unreadable-"))
        .collect()
}

#[tokio::test]
#[ignore = "needs the previous release's binary: tests/downgrade.sh builds it and runs this test"]
async fn dra_an_upgrade_from_the_previous_release_and_a_rollback_to_it_lose_no_claim() {
    let previous = previous_release();
    // Partitions (two per device, from the position-naming test guest),
    // so the checkpoint records carry what partitions add.
    let partitioned = format!(
        "version = 1\nresource = \"{RESOURCE}\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n[[nodes]]\npath = \"/dev/hot*\"\n[[companion-nodes]]\npath = \"{COMPANION}\"\n[hooks.dra-layout]\nguest = \"guests/position.wasm\"\n"
    );
    let dra = Dra::new(&[("hot.toml", &partitioned)]).await;
    dra.world.install_guest(
        wdp_guest_artifacts::HOSTILE_POSITION_LAYOUT,
        "position.wasm",
    );
    let published = DEVICES.len() * 3;
    let spawn = |program: &str, id: &str| spawn_release(&dra, program, &dra.world.config(), id);

    // The previous release serves and prepares a claim.
    let mut old = spawn(&previous, "pod-previous");
    dra.registered(&old, 1).await;
    dra.published(&old, published).await;
    let first = put_claim_of(&dra.api, "first", &["part-0-0"]);
    let first_ids = prepare_split(&dra, &old, &first).await.0;

    // Upgrade: this release starts beside it, takes the publishing over,
    // answers the old one's claim the same and prepares one of its own;
    // the old pod goes and this release unprepares its claim.
    let mut new = spawn(binary(), "pod-this");
    dra.registered(&new, 2).await;
    old.wait_for_log("a newer instance of the host publishes the ResourceSlices now")
        .await;
    assert_eq!(prepare_split(&dra, &new, &first).await.0, first_ids);
    let second = put_claim_of(&dra.api, "second", &["part-1-1"]);
    let second_ids = prepare(&dra, &new, &second).await;
    assert!(old.terminate().await.success(), "{}", old.log());
    unprepare(&dra, &first).await;
    assert!(!spec_path(&dra, &first).exists(), "{}", new.log());

    // Rollback: the previous release starts again beside this one, reads
    // the checkpoint this release wrote (nothing set aside), answers its
    // claim the same and, once this release's pod is gone, unprepares it.
    let back = spawn(&previous, "pod-rollback");
    dra.registered(&back, 3).await;
    new.wait_for_log("a newer instance of the host publishes the ResourceSlices now")
        .await;
    assert_eq!(prepare_split(&dra, &back, &second).await.0, second_ids);
    assert!(new.terminate().await.success(), "{}", new.log());
    unprepare(&dra, &second).await;
    assert!(!spec_path(&dra, &second).exists(), "{}", back.log());
    assert_eq!(set_aside(&dra), Vec::<String>::new(), "{}", back.log());
    assert!(
        !back.log().contains("set aside"),
        "the previous release set the checkpoint aside:\n{}",
        back.log()
    );

    // Through it all the pool was replaced in place, never deleted, and
    // the kubelet refused no registration.
    let stats = dra.api.stats();
    assert_eq!(
        (stats.slice_deletes, stats.slice_collection_deletes),
        (0, 0),
        "{stats:#?}"
    );
    assert!(
        dra.kubelet.state().failures.is_empty(),
        "{:?}",
        dra.kubelet.state().failures
    );
}

/// Runs `command` inside the mount namespace (and user namespace) of
/// process `pid`.
fn in_namespace_of(pid: u32, command: &[&str]) {
    let status = std::process::Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-U", "-m"])
        .args(command)
        .status()
        .unwrap();
    assert!(status.success(), "nsenter {command:?}");
}

#[tokio::test]
async fn dra_a_full_cdi_folder_or_a_read_only_state_folder_fails_the_claim_naming_it() {
    let dra = Dra::new(&[]).await;
    let tmp = dra.world.tmp.path();
    let (cdi, state) = (dra.cdi_dir(), tmp.join("state"));
    std::fs::create_dir_all(&cdi).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    // The plugin runs in its own mount namespace with a small tmpfs for
    // each folder (an unprivileged user namespace: no root needed), so the
    // test can fill one and make the other read-only.
    let script = "cdi=$1 state=$2; shift 2; \
        mount -t tmpfs -o size=256k tmpfs \"$cdi\" && \
        mount -t tmpfs -o size=256k tmpfs \"$state\" && exec \"$@\"";
    let args = run_args(&dra, &dra.world.config());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let plugin = Plugin::spawn_wrapped(
        &[
            "unshare",
            "-Urm",
            "sh",
            "-c",
            script,
            "sh",
            cdi.to_str().unwrap(),
            state.to_str().unwrap(),
        ],
        &args,
        tmp,
    );
    dra.registered(&plugin, 1).await;
    dra.published(&plugin, DEVICES.len()).await;
    let pid = plugin.pid();
    // The plugin's view of a path.
    let seen =
        |path: &std::path::Path| PathBuf::from(format!("/proc/{pid}/root{}", path.display()));
    let first = put_claim(&dra.api, "first", &[DEVICES[0]]);
    prepare(&dra, &plugin, &first).await;
    assert!(seen(&spec_path(&dra, &first)).exists());
    assert!(!spec_path(&dra, &first).exists(), "not the plugin's tmpfs");

    // The CDI folder is full: the claim fails naming the file and why.
    let filler = seen(&cdi.join("filler"));
    let mut file = std::fs::File::create(&filler).unwrap();
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut file, &block).is_ok() {}
    drop(file);
    let second = put_claim(&dra.api, "second", &[DEVICES[1]]);
    let outcome = dra
        .kubelet
        .prepare(DRIVER, std::slice::from_ref(&second))
        .await
        .unwrap();
    let error = outcome.claims[&second.uid].clone().unwrap_err();
    assert!(
        error.contains("No space left on device")
            && error.contains(&spec_path(&dra, &second).display().to_string()),
        "{error}"
    );
    std::fs::remove_file(&filler).unwrap();
    prepare(&dra, &plugin, &second).await;

    // The state folder turns read-only: unprepare cannot forget the claim,
    // says so naming the checkpoint, and succeeds once it is writable.
    in_namespace_of(pid, &["mount", "-o", "remount,ro", state.to_str().unwrap()]);
    let outcome = dra
        .kubelet
        .unprepare(DRIVER, std::slice::from_ref(&first))
        .await
        .unwrap();
    let error = outcome.claims[&first.uid].clone().unwrap_err();
    assert!(
        error.contains("Read-only file system") && error.contains("hot.e2e.example.com.json"),
        "{error}"
    );
    in_namespace_of(pid, &["mount", "-o", "remount,rw", state.to_str().unwrap()]);
    unprepare(&dra, &first).await;
    unprepare(&dra, &second).await;
    assert!(!seen(&spec_path(&dra, &second)).exists());
    // Still serving: a new claim prepares.
    let third = put_claim(&dra.api, "third", &[DEVICES[0]]);
    prepare(&dra, &plugin, &third).await;
}
