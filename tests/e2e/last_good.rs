//! The real binary restarted on a configuration broken while it was
//! stopped: it serves the last good configuration kept in its state
//! folder, says so at ERROR, and exits as before when started with
//! `--invalid-config-at-start refuse`.

use crate::support::{WAIT, World};

const FUSE: &str = "e2e.example.com/fuse";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_on_a_broken_configuration_keeps_the_devices_unless_told_to_refuse() {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.write_config(
        "fuse.toml",
        &format!("version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\n"),
    );
    let kubelet = world.kubelet().await;
    let mut plugin = world.spawn();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    // Registered comes before the snapshot is kept and SIGTERM handled.
    plugin
        .wait_for_log("running; SIGTERM or SIGINT stops")
        .await;
    assert!(plugin.terminate().await.success(), "{}", plugin.log());

    // Broken while stopped: the start serves the last good configuration.
    world.write_config("fuse.toml", "version = 1\nresource = 7\n");
    let mut plugin = world.spawn();
    kubelet.wait_registered(FUSE, 2, WAIT).await.unwrap();
    let log = plugin
        .wait_for_log("serving the last good configuration")
        .await;
    assert!(log.contains("ERROR") && log.contains("fuse.toml"), "{log}");
    assert!(plugin.wait(std::time::Duration::ZERO).await.is_none());
    plugin.terminate().await;

    // The operator's setting: refuse, as before snapshots.
    let mut refusing = world.spawn_with(&["--invalid-config-at-start", "refuse"]);
    let status = refusing.wait(WAIT).await.expect("run did not stop");
    assert!(!status.success(), "{}", refusing.log());
    assert!(refusing.log().contains("fuse.toml"), "{}", refusing.log());
}
