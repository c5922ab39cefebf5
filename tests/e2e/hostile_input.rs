//! Hostile input from a guest author or a careless operator: a guest that
//! writes to stderr, absurd replica counts, config entries and guests that
//! are not regular files, socket names that can never be bound. Each ends
//! in a clear refusal naming the culprit (or, for stderr, in normal
//! service), never in a panic, an abort or a hang.

use std::path::Path;
use std::process::Stdio;

use crate::support::{Plugin, WAIT, World, binary};

const FUSE: &str = "hostile.example.com/fuse";

/// Runs the binary to completion, failing the test if it does not exit
/// within [`WAIT`] (a blocking read would hang it). Returns (exit code,
/// stdout, stderr).
async fn run_bounded(args: &[&str]) -> (i32, String, String) {
    let child = tokio::process::Command::new(binary())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{args:?} did not finish"))
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn offline(world: &World, subcommand: &str) -> (i32, String, String) {
    let (config, root) = (world.config(), world.root());
    run_bounded(&[
        subcommand,
        "--config-dir",
        config.to_str().unwrap(),
        "--host-root",
        root.to_str().unwrap(),
    ])
    .await
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// /dev/fuse, with `resource_extra` inside the resource file.
fn fuse_world(resource_extra: &str) -> World {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "fuse.toml",
        &format!(
            "version = 1\nresource = \"{FUSE}\"\n{resource_extra}\n[[nodes]]\npath = \"/dev/fuse\"\n"
        ),
    );
    world
}

/// Every hook served by the guest that writes to stderr.
fn stderr_writer_world() -> World {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.install_guest(wdp_guest_artifacts::HOSTILE_STDERR_WRITER, "noisy.wasm");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    let mut text = format!("version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\n");
    for hook in [
        "discovery",
        "health",
        "preferred-allocation",
        "allocate",
        "pre-start",
    ] {
        text.push_str(&format!("[hooks.{hook}]\nguest = \"guests/noisy.wasm\"\n"));
    }
    world.write_config("fuse.toml", &text);
    world
}

#[tokio::test]
async fn check_and_test_serve_a_guest_that_writes_to_stderr() {
    let world = stderr_writer_world();
    let (code, stdout, stderr) = offline(&world, "check").await;
    assert_eq!(code, 0, "check failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains(FUSE), "{stdout}");
    assert!(stdout.contains("fuse Healthy"), "{stdout}");

    let (code, stdout, stderr) = offline(&world, "test").await;
    assert_eq!(code, 0, "test failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains(FUSE), "{stdout}");
}

#[tokio::test]
async fn run_serves_a_guest_that_writes_to_stderr() {
    let world = stderr_writer_world();
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    let record = kubelet
        .wait_registered(FUSE, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert_eq!(record.healthy_ids(), ["fuse"], "{}", plugin.log());
    let admission = kubelet
        .admit(FUSE, 1)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));
    assert_eq!(admission.devices, ["fuse"]);
    assert!(admission.pre_started);
    assert!(!plugin.log().contains("panicked"), "{}", plugin.log());
    assert!(plugin.terminate().await.success());
}

#[tokio::test]
async fn check_refuses_absurd_replica_counts_by_file_and_field() {
    for replicas in ["4294967295", "1000000"] {
        let world = World::new();
        world.add_node("/dev/fuse");
        world.write_config(
            "fuse.toml",
            &format!(
                "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = {replicas}\n"
            ),
        );
        let (code, _, stderr) = offline(&world, "check").await;
        assert_ne!(code, 0, "replicas = {replicas} passed check");
        assert!(!stderr.contains("memory allocation"), "{stderr}");
        assert!(stderr.contains("fuse.toml"), "{stderr}");
        assert!(stderr.contains("nodes[0].replicas"), "{stderr}");
    }
}

#[tokio::test]
async fn check_refuses_config_entries_that_are_not_files() {
    let world = fuse_world("");
    mkfifo(&world.config().join("x.toml"));
    let (code, _, stderr) = offline(&world, "check").await;
    assert_ne!(code, 0, "a FIFO passed check");
    assert!(stderr.contains("x.toml"), "{stderr}");
    assert!(stderr.contains("FIFO"), "{stderr}");

    std::fs::remove_file(world.config().join("x.toml")).unwrap();
    std::fs::create_dir(world.config().join("d.toml")).unwrap();
    let (code, _, stderr) = offline(&world, "check").await;
    assert_ne!(code, 0, "a directory passed check");
    assert!(stderr.contains("d.toml"), "{stderr}");
}

#[tokio::test]
async fn check_refuses_guests_that_are_not_files() {
    let fifo_world = fuse_world("");
    mkfifo(&fifo_world.config().join("pipe.wasm"));
    for (guest, culprit) in [
        ("/dev/zero", "/dev/zero"),
        ("pipe.wasm", "pipe.wasm"),
        (".", "a directory"),
    ] {
        fifo_world.write_config(
            "fuse.toml",
            &format!(
                "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.allocate]\nguest = \"{guest}\"\n"
            ),
        );
        let (code, _, stderr) = offline(&fifo_world, "check").await;
        assert_ne!(code, 0, "guest {guest} passed check");
        assert!(stderr.contains("fuse.toml"), "{guest}: {stderr}");
        assert!(stderr.contains(culprit), "{guest}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{guest}: {stderr}");
    }
}

#[tokio::test]
async fn check_refuses_socket_names_that_can_never_be_bound() {
    let long = "s".repeat(120);
    for socket in [long.as_str(), "nul\\u0000byte.sock"] {
        let world = fuse_world(&format!("socket = \"{socket}\""));
        let (code, _, stderr) = offline(&world, "check").await;
        assert_ne!(code, 0, "socket {socket:?} passed check");
        assert!(stderr.contains("fuse.toml"), "{stderr}");
        assert!(stderr.contains("field `socket`"), "{stderr}");
    }
}

/// Waits until `count` log lines mention `needle` (polling the log file,
/// which has no awaitable "appended" event, bounded by [`WAIT`]).
async fn wait_for_log_count(plugin: &Plugin, needle: &str, count: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut interval = tokio::time::interval(std::time::Duration::from_millis(10));
    loop {
        interval.tick().await;
        let log = plugin.log();
        if log.lines().filter(|l| l.contains(needle)).count() >= count {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{needle:?} never logged {count} times:\n{log}"
        );
    }
}

#[tokio::test]
async fn run_refuses_a_fifo_until_it_goes_and_still_stops_on_sigterm() {
    let world = fuse_world("");
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    kubelet
        .wait_registered(FUSE, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    let fifo = world.config().join("x.toml");
    mkfifo(&fifo);
    let log = plugin.wait_for_log("x.toml").await;
    assert!(log.contains("FIFO"), "{log}");
    assert!(log.contains("ERROR") || log.contains("WARN"), "{log}");

    // A good edit while the FIFO is there is refused too; the last good
    // configuration keeps serving.
    world.write_config(
        "fuse.toml",
        &format!(
            "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 3\n"
        ),
    );
    wait_for_log_count(&plugin, "x.toml", 2).await;
    let record = kubelet.plugin(FUSE).unwrap();
    assert_eq!(record.healthy_ids(), ["fuse"]);

    // Once the FIFO is gone, the edit applies.
    std::fs::remove_file(&fifo).unwrap();
    kubelet
        .wait_devices(FUSE, WAIT, |devices| devices.len() == 3)
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    // And with a FIFO back in place, SIGTERM still ends the process.
    mkfifo(&fifo);
    let status = plugin.terminate().await;
    assert!(status.success(), "{status:?}\n{}", plugin.log());
}
