//! A refused configuration is counted (`reloads_total{result="failure"}`)
//! once, however many reloads read it; a new bad edit counts again.

use crate::common::{nodes_world, sample};

const RESOURCE: &str = "example.com/acc";

fn failures(host: &wdp_host::Host) -> f64 {
    sample(
        &host.metrics().encode(),
        "wasm_device_plugin_reloads_total",
        &[("result", "failure")],
    )
}

#[tokio::test]
async fn one_refused_configuration_counts_once_however_often_it_is_read() {
    let world = nodes_world(RESOURCE, 2, "");
    let host = world.start().await;
    let good = std::fs::read_to_string(world.config().join("acc.toml")).unwrap();
    let bad = "version = 1\nresource = \"example.com/acc\n";
    world.write_config("acc.toml", bad);
    // The watcher's own reloads read the same content as these.
    for _ in 0..4 {
        host.reload().await.unwrap_err();
    }
    assert_eq!(failures(&host), 1.0, "{}", host.metrics().encode());
    // Written again unchanged: still the one refusal.
    world.write_config("acc.toml", bad);
    host.reload().await.unwrap_err();
    assert_eq!(failures(&host), 1.0);

    // Another bad edit is another refusal.
    world.write_config(
        "acc.toml",
        &good.replace("[[nodes]]", "surprise = 1\n[[nodes]]"),
    );
    host.reload().await.unwrap_err();
    host.reload().await.unwrap_err();
    assert_eq!(failures(&host), 2.0);

    // Fixed, then the first mistake made again: counted again.
    world.write_config("acc.toml", &good);
    host.reload().await.unwrap();
    world.write_config("acc.toml", bad);
    host.reload().await.unwrap_err();
    host.reload().await.unwrap_err();
    assert_eq!(failures(&host), 3.0);
    let valid = sample(
        &host.metrics().encode(),
        "wasm_device_plugin_config_valid",
        &[],
    );
    assert_eq!(valid, 0.0);
}

/// What `check` says of the world's configuration.
fn refusal(world: &crate::common::World) -> String {
    wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string()
}

#[test]
fn a_refused_guest_is_named_once_and_no_os_error_number_is_shown() {
    let hooks = "[hooks.allocate]\nguest = \"guests/allocate.wasm\"\n";
    let world = nodes_world(RESOURCE, 1, hooks);
    // Missing.
    let error = refusal(&world);
    assert_eq!(error.matches("allocate.wasm").count(), 1, "{error}");
    assert!(error.contains("does not exist"), "{error}");
    assert!(!error.contains("os error"), "{error}");

    // Unsigned, where signatures are required.
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate.wasm");
    let status = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .arg("-out")
        .arg(world.tmp.path().join("release.pem"))
        .status()
        .expect("the openssl command line must be installed");
    assert!(status.success());
    let status = std::process::Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(world.tmp.path().join("release.pem"))
        .arg("-out")
        .arg(world.config().join("release.pub"))
        .status()
        .unwrap();
    assert!(status.success());
    world.write_config(
        "host.toml",
        "version = 1\n[guest-signatures]\ntrusted-keys = [\"release.pub\"]\n",
    );
    let error = refusal(&world);
    assert!(error.contains("not signed"), "{error}");
    // The guest's path once, and its signature file by name.
    let guest = world.config().join("guests/allocate.wasm");
    assert_eq!(
        error.matches(&*guest.to_string_lossy()).count(),
        1,
        "{error}"
    );
    assert!(error.contains("allocate.wasm.sig"), "{error}");
    assert!(!error.contains("os error"), "{error}");
}
