//! The last good configuration at start: a host restarted on a refused
//! configuration serves what served last (its files and its signed
//! guest, kept under the state folder), says so (`config_valid` 0, the
//! reload error), and gives way to the directory once it loads; the keys
//! trusted now still judge the snapshot's guest; a first start, or the
//! `refuse` setting, refuses as before.

use std::time::Duration;

use crate::common::{WAIT, World, allocate_one, sample, wait_metrics};
use crate::signed::{SIGNED, key_pair, signed_world};
use wdp_host::{Host, HostOptions, Metrics};

const BROKEN: &str = "version = 1\nresource = 7\n";

/// What the allocate shaper adds to a response.
fn shaped(answer: &wdp_kubelet_api::v1beta1::AllocateResponse) -> bool {
    answer.container_responses[0]
        .envs
        .contains_key("WDP_VISIBLE_DEVICES")
}

/// Serves `world` once, so its configuration is kept as the last good one.
async fn served_once(world: &World, kubelet: &wdp_kubelet_sim::SimKubelet, times: u64) {
    let host = world.start().await;
    kubelet.wait_registered(SIGNED, times, WAIT).await.unwrap();
    host.shutdown().await;
}

async fn start(options: HostOptions) -> Result<std::sync::Arc<Host>, String> {
    Host::start(options, Metrics::new())
        .await
        .map_err(|error| error.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_on_a_refused_configuration_serves_the_last_good_one_until_the_directory_loads() {
    let world = signed_world(true);
    let kubelet = world.kubelet().await;
    served_once(&world, &kubelet, 1).await;
    let resource_file = std::fs::read_to_string(world.config().join("signed.toml")).unwrap();
    let guest = world.config().join("guests/allocate.wasm");
    let build = std::fs::read(&guest).unwrap();

    // A file that does not parse, and the guest gone.
    world.write_config("signed.toml", BROKEN);
    std::fs::remove_file(&guest).unwrap();
    let host = start(world.options())
        .await
        .expect("the last good one serves");
    let record = kubelet.wait_registered(SIGNED, 2, WAIT).await.unwrap();
    let mut client = kubelet.client(SIGNED).await.unwrap();
    let answer = client
        .allocate(allocate_one(&record.devices[0].id))
        .await
        .unwrap()
        .into_inner();
    assert!(shaped(&answer), "the kept guest answers: {answer:?}");
    let metrics = host.metrics().encode();
    assert_eq!(
        sample(&metrics, "wasm_device_plugin_config_valid", &[]),
        0.0
    );
    let error = host
        .last_reload_error()
        .borrow()
        .clone()
        .unwrap_or_default();
    assert!(error.contains("signed.toml"), "{error}");
    assert!(
        host.options()
            .state_dir
            .join(wdp_host::SNAPSHOT_DIR)
            .is_dir()
    );

    // The directory fixed: the live reload takes over.
    std::fs::write(&guest, &build).unwrap();
    world.write_config("signed.toml", &resource_file);
    let mut errors = host.last_reload_error();
    tokio::time::timeout(WAIT, errors.wait_for(Option::is_none))
        .await
        .expect("the fixed directory loads")
        .unwrap();
    wait_metrics(&host, "config_valid 1", |m| {
        sample(m, "wasm_device_plugin_config_valid", &[]) == 1.0
    })
    .await;
    let answer = client
        .allocate(allocate_one(&record.devices[0].id))
        .await
        .unwrap()
        .into_inner();
    assert!(shaped(&answer), "{answer:?}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_guest_the_keys_trusted_now_refuse_never_runs_the_start_is_refused() {
    let world = signed_world(true);
    let kubelet = world.kubelet().await;
    served_once(&world, &kubelet, 1).await;

    // The release key rotated out (its file now holds another key), and
    // the directory broken: the kept guest, signed by the old key, must
    // not run.
    world.write_config("signed.toml", BROKEN);
    key_pair(&world, "rotated");
    std::fs::copy(
        world.config().join("keys/rotated.pub"),
        world.config().join("keys/release.pub"),
    )
    .unwrap();
    let error = start(world.options()).await.unwrap_err();
    assert!(error.contains("signed.toml"), "{error}");
    assert_eq!(kubelet.state().plugins[SIGNED].registrations, 1);

    // Today's host.toml trusts another key (one that cannot be read):
    // its list is the one the kept guest is judged by, not the snapshot's.
    world.write_config("host.toml", "version = 1\npoll-interval-ms = 60000\n[guest-signatures]\ntrusted-keys = [\"keys/missing.pub\"]\n");
    let error = start(world.options()).await.unwrap_err();
    assert!(error.contains("signed.toml"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_and_the_refuse_setting_refuse_a_bad_configuration_as_before() {
    let world = signed_world(true);
    let good = std::fs::read_to_string(world.config().join("signed.toml")).unwrap();
    world.write_config("signed.toml", BROKEN);
    let error = start(world.options()).await.unwrap_err();
    assert!(error.contains("signed.toml"), "no snapshot yet: {error}");

    world.write_config("signed.toml", &good);
    let kubelet = world.kubelet().await;
    served_once(&world, &kubelet, 1).await;
    world.write_config("signed.toml", BROKEN);
    let refuse = HostOptions {
        serve_last_good: false,
        ..world.options()
    };
    let error = start(refuse).await.unwrap_err();
    assert!(error.contains("signed.toml"), "{error}");
    // The same start with the default setting serves the snapshot.
    let host = start(world.options()).await.unwrap();
    kubelet
        .wait_registered(SIGNED, 2, Duration::from_secs(20))
        .await
        .unwrap();
    host.shutdown().await;
}
