//! Configuration sets picked by the node's label: one config directory
//! with a default set and a named one, the host served in-process to the
//! simulated kubelet, its Node in the fake API server.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{WAIT, World, sample, wait_metrics};
use k8s_openapi::api::core::v1::Node;
use wdp_fake_apiserver::FakeApiServer;
use wdp_host::Metrics;
use wdp_host::{Host, HostOptions};

const LABEL: &str = "wasm-device-plugin.io/config";
const STATE: &str = "wasm-device-plugin.io/config.state";

fn resource(name: &str, path: &str) -> String {
    format!("version = 1\nresource = \"{name}\"\n[[nodes]]\npath = \"{path}\"\n")
}

/// The default set serves `example.com/fuse` and `example.com/tun`; set
/// `loops` serves the same `example.com/fuse` and `example.com/loop`.
/// The outcome of each switch goes into the node's state label.
fn sets_world() -> World {
    let world = World::new(None);
    for node in ["/dev/fuse", "/dev/net/tun", "/dev/loop0"] {
        world.write_host(node, "");
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n[config-sets]\nreport-state = true\n",
    );
    world.write_config("fuse.toml", &resource("example.com/fuse", "/dev/fuse"));
    world.write_config("tun.toml", &resource("example.com/tun", "/dev/net/tun"));
    std::fs::create_dir_all(world.config().join("sets/loops")).unwrap();
    world.write_config(
        "sets/loops/fuse.toml",
        &resource("example.com/fuse", "/dev/fuse"),
    );
    world.write_config(
        "sets/loops/loop.toml",
        &resource("example.com/loop", "/dev/loop*"),
    );
    world
}

/// Node `node-a`, labelled `value` when given.
fn node(value: Option<&str>) -> Node {
    let labels: BTreeMap<String, String> = value
        .map(|v| (LABEL.to_owned(), v.to_owned()))
        .into_iter()
        .collect();
    serde_json::from_value(serde_json::json!({"metadata": {"name": "node-a", "labels": labels}}))
        .unwrap()
}

async fn serving(world: &World, api: &FakeApiServer) -> (Arc<Host>, HostOptions) {
    api.write_kubeconfig(&world.tmp.path().join("kubeconfig"))
        .unwrap();
    let options = HostOptions {
        kubeconfig: Some(world.tmp.path().join("kubeconfig")),
        ..world.options()
    };
    let host = Host::start(options.clone(), Metrics::new()).await.unwrap();
    (host, options)
}

async fn resources(host: &Host) -> Vec<String> {
    host.status().await.into_keys().collect()
}

/// Waits for the node's state label to read `state` (the host writes it
/// after each switch, refusals included).
async fn state_is(api: &FakeApiServer, state: &str) {
    api.wait_for_node_labels(
        "node-a",
        |l| l.get(STATE).map(String::as_str) == Some(state),
        WAIT,
    )
    .await
    .unwrap_or_else(|labels| panic!("state never {state}: {labels:?}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_label_switches_the_set_live_refusals_keep_it_and_a_restart_serves_it_first() {
    let world = sets_world();
    let api = FakeApiServer::start().await.unwrap();
    api.put_node(node(None));
    let kubelet = world.kubelet().await;
    let (host, options) = serving(&world, &api).await;
    kubelet
        .wait_registered("example.com/tun", 1, WAIT)
        .await
        .unwrap();
    assert_eq!(host.config_set().await, None);
    assert_eq!(
        resources(&host).await,
        ["example.com/fuse", "example.com/tun"]
    );
    state_is(&api, "success").await;

    // Labelled `loops`: that set is applied live; the resource both sets
    // serve alike is neither restarted nor registered again.
    api.put_node(node(Some("loops")));
    kubelet
        .wait_registered("example.com/loop", 1, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;
    assert_eq!(host.config_set().await.as_deref(), Some("loops"));
    assert_eq!(
        resources(&host).await,
        ["example.com/fuse", "example.com/loop"]
    );
    let state = kubelet.state();
    let fuse = &state.plugins["example.com/fuse"];
    assert_eq!((fuse.registrations, fuse.streaming), (1, true));
    assert!(state.violations.is_empty(), "{:?}", state.violations);
    let metrics = host.metrics().encode();
    assert_eq!(
        sample(
            &metrics,
            "wasm_device_plugin_config_set_info",
            &[("set", "loops")]
        ),
        1.0,
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "wasm_device_plugin_config_set_info",
            &[("set", "default")]
        ),
        0.0
    );
    assert_eq!(
        std::fs::read_to_string(options.state_dir.join("config-set")).unwrap(),
        "loops"
    );

    // A label naming no set, then a set that does not load: both refused,
    // `loops` keeps serving.
    api.put_node(node(Some("training")));
    state_is(&api, "failed").await;
    assert_eq!(host.config_set().await.as_deref(), Some("loops"));
    std::fs::create_dir_all(world.config().join("sets/broken")).unwrap();
    world.write_config("sets/broken/bad.toml", "version = 1\nresource = 7\n");
    api.put_node(node(Some("loops")));
    state_is(&api, "success").await;
    api.put_node(node(Some("broken")));
    state_is(&api, "failed").await;
    assert_eq!(host.config_set().await.as_deref(), Some("loops"));
    assert_eq!(
        resources(&host).await,
        ["example.com/fuse", "example.com/loop"]
    );
    wait_metrics(&host, "config_valid 0", |m| {
        sample(m, "wasm_device_plugin_config_valid", &[]) == 0.0
    })
    .await;

    // Its file fixed, the set the label names is applied with no label
    // change; then the label goes back to `loops`.
    world.write_config(
        "sets/broken/bad.toml",
        &resource("example.com/bad", "/dev/loop0"),
    );
    kubelet
        .wait_registered("example.com/bad", 1, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;
    assert_eq!(host.config_set().await.as_deref(), Some("broken"));
    api.put_node(node(Some("loops")));
    kubelet
        .wait_registered("example.com/loop", 2, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;

    // A restart while the API server does not answer: the set last
    // applied is served from the start.
    host.shutdown().await;
    api.set_refusing(true);
    let restarted = Host::start(options.clone(), Metrics::new()).await.unwrap();
    assert_eq!(restarted.config_set().await.as_deref(), Some("loops"));
    assert_eq!(
        resources(&restarted).await,
        ["example.com/fuse", "example.com/loop"]
    );

    // The API server back and the label gone: the default set.
    api.set_refusing(false);
    api.put_node(node(None));
    kubelet
        .wait_registered("example.com/tun", 2, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;
    assert_eq!(restarted.config_set().await, None);
    restarted.shutdown().await;
}

#[test]
fn check_validates_every_set_and_names_the_one_refused() {
    let world = sets_world();
    let reports = wdp_host::check(&world.config(), &world.root()).unwrap();
    assert_eq!(reports.len(), 2 + 2, "two resources in each set");
    std::fs::create_dir_all(world.config().join("sets/broken")).unwrap();
    world.write_config("sets/broken/bad.toml", "version = 1\nresource = 7\n");
    let refused = wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string();
    assert!(refused.contains("sets/broken/bad.toml"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_sets_fails_no_dra_call_of_a_resource_both_serve_nor_rewrites_its_slices() {
    use crate::common::dra_world::*;
    let w = DraWorld::new("").await;
    // Set `plus-fuse`: the same DRA resource, and a device-plugin resource.
    std::fs::create_dir_all(w.world.config().join("sets/plus-fuse")).unwrap();
    std::fs::copy(
        w.world.config().join("gpu.toml"),
        w.world.config().join("sets/plus-fuse/gpu.toml"),
    )
    .unwrap();
    w.world.write_host("/dev/fuse", "");
    w.world.write_config(
        "sets/plus-fuse/fuse.toml",
        &resource("example.com/fuse", "/dev/fuse"),
    );
    w.api.put_node(node(None));
    let kubelet = w.world.kubelet().await;
    let (host, endpoint) = w.serving().await;
    let pool_before = w.api.pool_history(NODE, DRIVER);

    // Claims prepared and unprepared back to back on the DRA resource,
    // while the node switches sets four times each way.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let calls = async {
        let mut failures = Vec::new();
        let mut made = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let claimed = w
                .api
                .put_claim(claim(&format!("c{made}"), DRIVER, &[&name_of(GPU_A)]));
            let prepared = prepare_one(&endpoint, &claimed).await.error;
            let unprepared = unprepare_one(&endpoint, &claimed).await;
            failures.extend([prepared, unprepared].into_iter().filter(|e| !e.is_empty()));
            made += 1;
        }
        (made, failures)
    };
    let switches = async {
        for round in 1..=4u64 {
            w.api.put_node(node(Some("plus-fuse")));
            kubelet
                .wait_registered("example.com/fuse", round, WAIT)
                .await
                .unwrap();
            w.api.put_node(node(None));
            wait_metrics(&host, "the default set", |m| {
                sample(
                    m,
                    "wasm_device_plugin_config_set_info",
                    &[("set", "default")],
                ) == 1.0
            })
            .await;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    };
    let ((made, failures), ()) = tokio::join!(calls, switches);
    assert!(made > 0);
    assert_eq!(failures, Vec::<String>::new(), "{made} claims");
    // The DRA resource, the same in both sets, was never restarted: its
    // pool was not written again.
    assert_eq!(w.api.pool_history(NODE, DRIVER), pool_before);
    host.shutdown().await;
}

/// Waits for `config_valid` to read `value`.
async fn config_valid_is(host: &Host, value: f64) {
    wait_metrics(host, &format!("config_valid {value}"), |m| {
        sample(m, "wasm_device_plugin_config_valid", &[]) == value
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_folder_that_cannot_name_a_set_concerns_only_the_nodes_labelled_for_it() {
    let world = sets_world();
    // `default` names the top-level set: the folder is refused, alone.
    std::fs::create_dir_all(world.config().join("sets/default")).unwrap();
    world.write_config(
        "sets/default/shared.toml",
        &resource("example.com/shared", "/dev/loop0"),
    );
    let api = FakeApiServer::start().await.unwrap();
    api.put_node(node(None));
    let kubelet = world.kubelet().await;
    // A node labelled for no set starts and serves the default set.
    let (host, _) = serving(&world, &api).await;
    state_is(&api, "success").await;
    assert_eq!(
        resources(&host).await,
        ["example.com/fuse", "example.com/tun"]
    );
    config_valid_is(&host, 1.0).await;

    // A named set is applied as usual, and reports valid.
    api.put_node(node(Some("loops")));
    kubelet
        .wait_registered("example.com/loop", 1, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;
    config_valid_is(&host, 1.0).await;

    // The node labelled `default`: that folder concerns it; `loops` keeps
    // serving, and the metric and the state label say so.
    api.put_node(node(Some("default")));
    state_is(&api, "failed").await;
    config_valid_is(&host, 0.0).await;
    assert_eq!(host.config_set().await.as_deref(), Some("loops"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_a_broken_set_serves_its_last_good_snapshot_says_failed_and_posts_an_event() {
    let world = sets_world();
    let api = FakeApiServer::start().await.unwrap();
    api.put_node(node(Some("loops")));
    let kubelet = world.kubelet().await;
    let (host, options) = serving(&world, &api).await;
    kubelet
        .wait_registered("example.com/loop", 1, WAIT)
        .await
        .unwrap();
    state_is(&api, "success").await;
    host.shutdown().await;

    // The set's file broken while the host was stopped.
    let good = std::fs::read_to_string(world.config().join("sets/loops/loop.toml")).unwrap();
    world.write_config("sets/loops/loop.toml", "version = 1\nresource = 7\n");
    let restarted = Host::start(options, Metrics::new()).await.unwrap();
    assert_eq!(restarted.config_set().await.as_deref(), Some("loops"));
    assert_eq!(
        resources(&restarted).await,
        ["example.com/fuse", "example.com/loop"]
    );
    kubelet
        .wait_registered("example.com/loop", 2, WAIT)
        .await
        .unwrap();
    config_valid_is(&restarted, 0.0).await;
    state_is(&api, "failed").await;
    let events = api
        .wait_for_events(
            |events| {
                events.iter().any(|e| {
                    e.reason.as_deref() == Some(wdp_host::EVENT_REASON)
                        && e.involved_object.name.as_deref() == Some("node-a")
                })
            },
            WAIT,
        )
        .await
        .unwrap_or_else(|events| panic!("no Event: {events:?}"));
    let message = events[0].message.clone().unwrap_or_default();
    assert!(message.contains("sets/loops/loop.toml"), "{message}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));

    // Fixed: the live reload takes over from the snapshot.
    world.write_config("sets/loops/loop.toml", &good);
    state_is(&api, "success").await;
    config_valid_is(&restarted, 1.0).await;
    restarted.shutdown().await;
}
