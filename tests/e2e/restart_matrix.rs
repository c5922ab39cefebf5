//! The restart matrix: each promise a running host keeps, kept across
//! every way a host stops and starts. One row per case, each its own test
//! (run in parallel), all driven by one table:
//!
//! - **how it stops**: SIGTERM or SIGKILL;
//! - **when the configuration changes**: live, with the host running (the
//!   switch is under way when it stops), or while it is stopped;
//! - **what the state folder holds at the next start**: as left, the
//!   switch record missing, truncated or garbage, the DRA checkpoint
//!   truncated;
//! - **what is reachable at the next start**: PodResources, the API
//!   server.
//!
//! The promises: **the last good configuration serves** (a configuration
//! broken while the host was stopped, its file or its guest, never takes
//! the node's devices away: the snapshot of the last one that served
//! does, its guest included); **no device in two places** (a device a container holds
//! through the device plugin is never published through DRA, a device a
//! prepared claim holds is never offered through the device plugin), and
//! **every prepared claim is unprepared** (the driver it was prepared by
//! is served until it is, even when no resource names it any more, and
//! its ResourceSlices go). The real binary runs against the kubelet
//! stand-in (device plugins, PodResources, its device-manager checkpoint),
//! the DRA kubelet stand-in and the fake API server.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wdp_fake_apiserver::FakeApiServer;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, PodResourcesServer, SimDraKubelet, SimKubelet};

use crate::support::{Plugin, World, name_of};

const RESOURCE: &str = "e2e.example.com/hot";
const DRIVER: &str = "hot.e2e.example.com";
const NODE: &str = "node-e2e";
/// The loaded test machine: a generous bound on every wait.
const LONG: Duration = Duration::from_secs(30);

/// Which way the resource moves between the kubelet APIs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Direction {
    /// Served through the device plugin, then through DRA.
    ToDra,
    /// Served through DRA, then through the device plugin.
    ToDevicePlugin,
}

/// How the host stops.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stop {
    Term,
    Kill,
}

/// When the resource file changes API.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Edit {
    /// While the host runs: the switch is under way when it stops.
    Live,
    /// While it is stopped: the host never saw the switch.
    Offline,
}

/// What happens to the state folder while the host is stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Damage {
    None,
    RecordMissing,
    RecordTruncated,
    RecordGarbage,
    CheckpointTruncated,
}

/// One row of the matrix.
#[derive(Clone, Copy, Debug)]
struct Case {
    direction: Direction,
    stop: Stop,
    edit: Edit,
    damage: Damage,
    /// Whether PodResources answers when the host starts again (it comes
    /// back later when not).
    pod_resources_at_start: bool,
    /// Whether the API server answers when the host starts again (it comes
    /// back later when not).
    api_at_start: bool,
}

/// The node: fixture devices, the kubelet stand-ins and the API server.
struct Node {
    world: World,
    api: Arc<FakeApiServer>,
    kubelet: SimKubelet,
    pod_resources: Option<PodResourcesServer>,
    dra: SimDraKubelet,
}

impl Node {
    async fn new(api: &str) -> Self {
        let world = World::new();
        for node in ["/dev/hot0", "/dev/hot1", "/dev/ctl0"] {
            world.add_node(node);
        }
        world.write_config(
            "host.toml",
            "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
        );
        let server = Arc::new(FakeApiServer::start().await.unwrap());
        server.put_node(
            serde_json::from_value(serde_json::json!({"metadata": {"name": NODE}})).unwrap(),
        );
        server
            .write_kubeconfig(&world.tmp.path().join("kubeconfig"))
            .unwrap();
        let kubelet = world.kubelet().await;
        let pod_resources = Some(
            kubelet
                .serve_pod_resources(world.tmp.path().join("pod-resources/kubelet.sock"))
                .unwrap(),
        );
        let dra = SimDraKubelet::start(world.registry(), DraSimOptions::default())
            .await
            .unwrap();
        let node = Self {
            world,
            api: server,
            kubelet,
            pod_resources,
            dra,
        };
        node.serve_through(api);
        node
    }

    /// Writes the resource file for `api` ("device-plugin" or "dra").
    fn serve_through(&self, api: &str) {
        let serving = match api {
            "dra" => format!("api = \"dra\"\ndriver = \"{DRIVER}\"\n"),
            _ => String::new(),
        };
        self.world.write_config(
            "hot.toml",
            &format!(
                "version = 1\nresource = \"{RESOURCE}\"\n{serving}[[nodes]]\npath = \"/dev/hot*\"\n[[companion-nodes]]\npath = \"/dev/ctl0\"\n"
            ),
        );
    }

    fn state(&self) -> PathBuf {
        self.world.tmp.path().join("state")
    }

    fn pod_resources_socket(&self) -> PathBuf {
        self.world.tmp.path().join("pod-resources/kubelet.sock")
    }

    fn spawn(&self) -> Plugin {
        let tmp = self.world.tmp.path();
        let path = |p: PathBuf| p.to_str().unwrap().to_owned();
        let extra = [
            "--registration".to_owned(),
            "kubelet".to_owned(),
            "--cdi-dir".to_owned(),
            path(tmp.join("cdi")),
            "--plugins-dir".to_owned(),
            path(tmp.join("kubelet-plugins")),
            "--state-dir".to_owned(),
            path(self.state()),
            "--kubeconfig".to_owned(),
            path(tmp.join("kubeconfig")),
            "--node-name".to_owned(),
            NODE.to_owned(),
            "--pod-resources-socket".to_owned(),
            path(self.pod_resources_socket()),
        ];
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.world.spawn_with(&extra)
    }

    /// The DRA device names published for the node (every slice).
    fn published(&self) -> BTreeSet<String> {
        self.api
            .slices_of(NODE, DRIVER)
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
            .collect()
    }

    /// Every DRA device name any pool write published, since the start.
    fn ever_published(&self) -> BTreeSet<String> {
        self.api
            .pool_history(NODE, DRIVER)
            .into_iter()
            .flatten()
            .collect()
    }

    async fn wait_published(&self, plugin: &Plugin, expected: &[&str]) {
        let expected: BTreeSet<String> = expected.iter().map(|d| name_of(d)).collect();
        self.api
            .wait_for_slices(
                |slices| {
                    let names: BTreeSet<String> = slices
                        .iter()
                        .filter(|s| s.spec.driver == DRIVER)
                        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
                        .collect();
                    names == expected
                },
                LONG,
            )
            .await
            .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", self.published(), plugin.log()));
    }

    /// Waits until the kubelet sees exactly `healthy` as the resource's
    /// Healthy devices through the device plugin.
    async fn wait_offered(&self, plugin: &Plugin, healthy: &[&str]) {
        let healthy: Vec<String> = healthy.iter().map(|d| (*d).to_owned()).collect();
        self.kubelet
            .wait_for("the device plugin's offer", LONG, |s| {
                s.plugins
                    .get(RESOURCE)
                    .is_some_and(|r| r.streaming && r.healthy_ids() == healthy)
            })
            .await
            .unwrap_or_else(|e| {
                panic!("{e}: {:?}\n{}", self.kubelet.plugin(RESOURCE), plugin.log())
            });
    }

    fn damage(&self, damage: Damage) {
        let record = self
            .state()
            .join("api-switch")
            .join(format!("{}.json", RESOURCE.replace('/', "_")));
        let checkpoint = self.state().join("dra").join(format!("{DRIVER}.json"));
        match damage {
            Damage::None => {}
            Damage::RecordMissing => {
                let _ = std::fs::remove_file(&record);
            }
            Damage::RecordTruncated => truncate(&record),
            Damage::RecordGarbage => {
                if record.exists() {
                    std::fs::write(&record, b"\x00\x7fnot json at all\xff").unwrap();
                }
            }
            Damage::CheckpointTruncated => truncate(&checkpoint),
        }
    }
}

/// Stops the host `how`; a SIGTERM must end in a clean exit.
async fn stop(plugin: &mut Plugin, how: Stop) {
    match how {
        Stop::Term => assert!(plugin.terminate().await.success(), "{}", plugin.log()),
        Stop::Kill => {
            let killed = std::process::Command::new("kill")
                .args(["-KILL", &plugin.pid().to_string()])
                .status()
                .unwrap();
            assert!(killed.success());
            plugin.wait(LONG).await.expect("no exit after SIGKILL");
        }
    }
}

/// Cuts `path` to half its length (as a crash mid-write on a filesystem
/// without atomic renames would).
fn truncate(path: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    std::fs::write(path, &bytes[..bytes.len() / 2]).unwrap();
}

/// A claim allocated `hot0` in the node's pool.
fn put_claim(api: &FakeApiServer) -> ClaimRef {
    let claim = serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "hot", "exactly": {"deviceClassName": "hot"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "hot", "driver": DRIVER, "pool": NODE, "device": name_of("/dev/hot0")}
        ]}}}
    }))
    .unwrap();
    let stored = api.put_claim(claim);
    ClaimRef::new("default", "held", stored.metadata.uid.as_deref().unwrap())
}

/// Device plugin → DRA: a container holds `hot0` through the device
/// plugin; whatever the case, `hot0` is never published while it does,
/// and is once the container ends.
async fn to_dra(case: Case) {
    let mut node = Node::new("device-plugin").await;
    let mut plugin = node.spawn();
    node.kubelet
        .wait_registered(RESOURCE, 1, LONG)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let admission = node.kubelet.admit(RESOURCE, 1).await.unwrap();
    assert_eq!(admission.devices, ["hot0"]);

    if case.edit == Edit::Live {
        node.serve_through("dra");
        plugin
            .wait_for_log("switching from the device-plugin API to DRA")
            .await;
        node.wait_published(&plugin, &["/dev/hot1"]).await;
    }
    stop(&mut plugin, case.stop).await;
    if case.edit == Edit::Offline {
        node.serve_through("dra");
    }
    node.damage(case.damage);
    if !case.pod_resources_at_start {
        node.pod_resources.take().unwrap().stop();
    }

    let plugin = node.spawn();
    // Whatever the record says or lacks, the node says a device plugin
    // served the resource: the handover is resumed before anything is
    // published.
    plugin
        .wait_for_log("resuming the switch from the device-plugin API to DRA")
        .await;
    if case.pod_resources_at_start {
        node.wait_published(&plugin, &["/dev/hot1"]).await;
    } else {
        plugin
            .wait_for_log("cannot tell which devices running containers hold")
            .await;
        // Nothing is published that a container might hold: here, nothing
        // of the restarted host's (a slice left from before the stop, in
        // the live case, still names only hot1).
        assert!(
            !node.published().contains(&name_of("/dev/hot0")),
            "{:?}\n{}",
            node.published(),
            plugin.log()
        );
        node.pod_resources = Some(
            node.kubelet
                .serve_pod_resources(node.pod_resources_socket())
                .unwrap(),
        );
        node.wait_published(&plugin, &["/dev/hot1"]).await;
    }
    assert!(
        !node.ever_published().contains(&name_of("/dev/hot0")),
        "hot0 was published while a container held it: {:?}\n{}",
        node.api.pool_history(NODE, DRIVER),
        plugin.log()
    );
    // The device moves over once its container ends.
    assert!(node.kubelet.end_pod(&admission.pod));
    node.wait_published(&plugin, &["/dev/hot0", "/dev/hot1"])
        .await;
}

/// DRA → device plugin: a claim holding `hot0` is prepared; whatever the
/// case, `hot0` is not offered through the device plugin until the claim
/// is unprepared, the driver keeps serving the unprepare, and its slices
/// go.
async fn to_device_plugin(case: Case) {
    let node = Node::new("dra").await;
    let mut plugin = node.spawn();
    node.wait_published(&plugin, &["/dev/hot0", "/dev/hot1"])
        .await;
    node.dra
        .wait_for("the driver's registration", LONG, |s| {
            s.drivers.contains_key(DRIVER)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let claim = put_claim(&node.api);
    let prepared = node
        .dra
        .prepare(DRIVER, std::slice::from_ref(&claim))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    prepared.claims[&claim.uid]
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    if case.edit == Edit::Live {
        node.serve_through("device-plugin");
        plugin
            .wait_for_log("switching from DRA to the device-plugin API")
            .await;
        node.wait_offered(&plugin, &["hot1"]).await;
    }
    let registrations = node
        .dra
        .state()
        .registrations
        .get(DRIVER)
        .copied()
        .unwrap_or(0);
    stop(&mut plugin, case.stop).await;
    if case.edit == Edit::Offline {
        node.serve_through("device-plugin");
    }
    node.damage(case.damage);
    node.api.set_refusing(!case.api_at_start);

    let plugin = node.spawn();
    if case.damage == Damage::CheckpointTruncated {
        // Which devices the claims hold cannot be told: none is offered
        // until the checkpoint can be read (here: the operator removes it).
        let log = plugin
            .wait_for_log(
                "every device of the resource is withheld until its checkpoint can be read",
            )
            .await;
        assert!(log.contains(&format!("dra/{DRIVER}.json")), "{log}");
        node.wait_offered(&plugin, &[]).await;
        std::fs::remove_file(node.state().join("dra").join(format!("{DRIVER}.json"))).unwrap();
        node.wait_offered(&plugin, &["hot0", "hot1"]).await;
        return;
    }
    plugin
        .wait_for_log("resuming the switch from DRA to the device-plugin API")
        .await;
    node.wait_offered(&plugin, &["hot1"]).await;
    if !case.api_at_start {
        // The driver's slices cannot be deleted yet: tried again until the
        // API server answers, while the device plugin withholds hot0.
        plugin
            .wait_for_log("cannot delete the ResourceSlices of a driver no longer served")
            .await;
        node.api.set_refusing(false);
    }
    // The kubelet admits nothing the claim holds.
    let admission = node.kubelet.admit(RESOURCE, 1).await.unwrap();
    assert_eq!(admission.devices, ["hot1"], "{}", plugin.log());
    assert!(node.kubelet.end_pod(&admission.pod));
    // The driver's slices go beside the device plugin offering the devices.
    node.wait_published(&plugin, &[]).await;
    // The claim can still be unprepared, through the driver no resource
    // names any more; then its device is offered.
    node.dra
        .wait_for("the draining driver's registration", LONG, |s| {
            s.drivers.contains_key(DRIVER)
                && s.registrations
                    .get(DRIVER)
                    .is_some_and(|&n| n > registrations)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let unprepared = node
        .dra
        .unprepare(DRIVER, std::slice::from_ref(&claim))
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    unprepared.claims[&claim.uid]
        .as_ref()
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    node.wait_offered(&plugin, &["hot0", "hot1"]).await;
}

/// What breaks in the configuration while the host is stopped.
#[derive(Clone, Copy, Debug)]
enum Break {
    /// The resource file is no TOML any more.
    FileGarbage,
    /// The resource file is cut in half.
    FileTruncated,
    /// The allocate guest is deleted.
    GuestMissing,
    /// The allocate guest is garbage.
    GuestGarbage,
}

/// The last good configuration serves: after `stop` and `broken`, the
/// restarted host registers the resource again and its (kept) allocate
/// guest still shapes what a container gets.
async fn last_good(stop: Stop, broken: Break) {
    const FUSE: &str = "e2e.example.com/fuse";
    let world = World::new();
    world.add_node("/dev/fuse");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm");
    let file = format!(
        "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.allocate]\nguest = \"guests/allocate-shaper.wasm\"\n"
    );
    world.write_config("fuse.toml", &file);
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    kubelet.wait_registered(FUSE, 1, LONG).await.unwrap();
    plugin
        .wait_for_log("running; SIGTERM or SIGINT stops")
        .await;
    let first = kubelet.admit(FUSE, 1).await.unwrap();
    let shaped = first.response.envs;
    assert!(shaped.contains_key("WDP_VISIBLE_DEVICES"), "{shaped:?}");
    assert!(kubelet.end_pod(&first.pod));
    self::stop(&mut plugin, stop).await;
    let guest = world.config().join("guests/allocate-shaper.wasm");
    let (named, broken_text) = match broken {
        Break::FileGarbage => ("fuse.toml", Some("version = 1\nresource = 7\n".to_owned())),
        Break::FileTruncated => ("fuse.toml", Some(file[..file.len() / 2].to_owned())),
        Break::GuestMissing => {
            std::fs::remove_file(&guest).unwrap();
            ("allocate-shaper.wasm", None)
        }
        Break::GuestGarbage => {
            std::fs::write(&guest, b"\0asm\x0d\0\x01\0garbage").unwrap();
            ("allocate-shaper.wasm", None)
        }
    };
    if let Some(text) = broken_text {
        world.write_config("fuse.toml", &text);
    }

    let plugin = world.spawn();
    kubelet
        .wait_for("the restarted host's offer", LONG, |s| {
            s.plugins
                .get(FUSE)
                .is_some_and(|r| r.registrations >= 2 && r.streaming && r.healthy_ids() == ["fuse"])
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    let log = plugin
        .wait_for_log("serving the last good configuration")
        .await;
    assert!(log.contains("ERROR") && log.contains(named), "{log}");
    let admission = kubelet.admit(FUSE, 1).await.unwrap();
    assert_eq!(
        admission.response.envs,
        shaped,
        "the kept guest shapes the answer\n{}",
        plugin.log()
    );
}

async fn run(case: Case) {
    match case.direction {
        Direction::ToDra => to_dra(case).await,
        Direction::ToDevicePlugin => to_device_plugin(case).await,
    }
}

/// The matrix: one test per row.
macro_rules! matrix {
    ($($name:ident: $direction:ident, $stop:ident, $edit:ident, $damage:ident, $pod_resources:expr, $api:expr;)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                run(Case {
                    direction: Direction::$direction,
                    stop: Stop::$stop,
                    edit: Edit::$edit,
                    damage: Damage::$damage,
                    pod_resources_at_start: $pod_resources,
                    api_at_start: $api,
                })
                .await;
            }
        )*
    };
}

matrix! {
    to_dra_edited_while_stopped_after_sigterm: ToDra, Term, Offline, None, true, true;
    to_dra_edited_while_stopped_after_sigkill: ToDra, Kill, Offline, None, true, true;
    to_dra_live_then_sigkill: ToDra, Kill, Live, None, true, true;
    to_dra_live_then_sigkill_record_missing: ToDra, Kill, Live, RecordMissing, true, true;
    to_dra_live_then_sigkill_record_truncated: ToDra, Kill, Live, RecordTruncated, true, true;
    to_dra_live_then_sigterm_record_garbage: ToDra, Term, Live, RecordGarbage, true, true;
    to_dra_edited_while_stopped_pod_resources_away_at_start: ToDra, Term, Offline, None, false, true;
    to_device_plugin_edited_while_stopped_after_sigterm: ToDevicePlugin, Term, Offline, None, true, true;
    to_device_plugin_edited_while_stopped_after_sigkill: ToDevicePlugin, Kill, Offline, None, true, true;
    to_device_plugin_live_then_sigkill: ToDevicePlugin, Kill, Live, None, true, true;
    to_device_plugin_live_then_sigterm_record_truncated: ToDevicePlugin, Term, Live, RecordTruncated, true, true;
    to_device_plugin_live_then_sigkill_record_missing: ToDevicePlugin, Kill, Live, RecordMissing, true, true;
    to_device_plugin_edited_while_stopped_checkpoint_truncated: ToDevicePlugin, Term, Offline, CheckpointTruncated, true, true;
    to_device_plugin_edited_while_stopped_api_server_away_at_start: ToDevicePlugin, Kill, Offline, None, true, false;
}

/// The configuration rows: one test per way it stops and what breaks.
macro_rules! config_matrix {
    ($($name:ident: $stop:ident, $broken:ident;)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                last_good(Stop::$stop, Break::$broken).await;
            }
        )*
    };
}

config_matrix! {
    last_good_serves_after_sigterm_file_garbage: Term, FileGarbage;
    last_good_serves_after_sigkill_file_garbage: Kill, FileGarbage;
    last_good_serves_after_sigkill_file_truncated: Kill, FileTruncated;
    last_good_serves_after_sigterm_guest_missing: Term, GuestMissing;
    last_good_serves_after_sigkill_guest_garbage: Kill, GuestGarbage;
}
