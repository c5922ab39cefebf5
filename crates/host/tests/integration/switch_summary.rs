//! A configuration set switch names as updated only the resources whose
//! serving changed: a resource each set holds alike is unchanged, though
//! read from another file.

use crate::common::World;

fn resource(name: &str, path: &str, extra: &str) -> String {
    format!("version = 1\nresource = \"{name}\"\n{extra}[[nodes]]\npath = \"{path}\"\n")
}

#[tokio::test]
async fn a_switch_names_only_what_changed() {
    let world = World::new(None);
    for node in ["/dev/fuse", "/dev/net/tun"] {
        world.write_host(node, "");
    }
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n",
    );
    world.write_config("fuse.toml", &resource("example.com/fuse", "/dev/fuse", ""));
    world.write_config("tun.toml", &resource("example.com/tun", "/dev/net/tun", ""));
    std::fs::create_dir_all(world.config().join("sets/other")).unwrap();
    // The same fuse resource; tun with replicas.
    world.write_config(
        "sets/other/fuse.toml",
        &resource("example.com/fuse", "/dev/fuse", ""),
    );
    world.write_config(
        "sets/other/tun.toml",
        &resource("example.com/tun", "/dev/net/tun", "").replace(
            "path = \"/dev/net/tun\"\n",
            "path = \"/dev/net/tun\"\nreplicas = 2\n",
        ),
    );
    let host = world.start().await;
    let summary = host
        .switch_config_set(Some("other".to_owned()))
        .await
        .unwrap();
    assert_eq!(summary.updated, ["example.com/tun"], "{summary:?}");
    assert_eq!(summary.unchanged, ["example.com/fuse"], "{summary:?}");
    // Back to the default set: the same again.
    let summary = host.switch_config_set(None).await.unwrap();
    assert_eq!(summary.updated, ["example.com/tun"], "{summary:?}");
    assert_eq!(summary.unchanged, ["example.com/fuse"], "{summary:?}");
    // The resource now names the file of the set it was read from.
    let fuse = host.resource("example.com/fuse").await.unwrap();
    let file = fuse.spec().config.file.clone();
    assert!(
        file.ends_with("fuse.toml") && !file.to_string_lossy().contains("sets/"),
        "{}",
        file.display()
    );
    host.shutdown().await;
}
