//! Registration through the kubelet's plugin watcher: a registration
//! socket per resource in the plugins registry folder, found and dialled
//! by a plugin-watcher stand-in the way the kubelet does it (socket path as
//! `:authority`), kubelet restarts, refusals, and `--registration auto`.

use std::path::Path;

use wdp_kubelet_api::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
    registration_server::{Registration, RegistrationServer},
};
use wdp_kubelet_sim::kubelet_dial::{DialError, KubeletStyleConn, grpc_go_authority};

use wdp_kubelet_sim::{SimPluginWatcher, WatchedPlugin};

use crate::support::{Plugin, WAIT, World, free_addr, http_get, run_to_end, wait_metric};

const FUSE: &str = "e2e.example.com/fuse";
const TUN: &str = "e2e.example.com/tun";
const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";

fn two_resources(world: &World) {
    world.add_node("/dev/fuse");
    world.add_node("/dev/net/tun");
    world.write_config(
        "host.toml",
        "version = 1\npoll-interval-ms = 50\nreload-debounce-ms = 20\n",
    );
    world.write_config(
        "fuse.toml",
        &format!(
            "version = 1\nresource = \"{FUSE}\"\nsocket = \"fuse.sock\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 2\n"
        ),
    );
    world.write_config(
        "tun.toml",
        &format!(
            "version = 1\nresource = \"{TUN}\"\nsocket = \"tun.sock\"\npre-start-required = true\n[[nodes]]\npath = \"/dev/net/tun\"\n"
        ),
    );
}

/// Waits for `count` registrations of `resource`; on timeout, says why.
async fn registered(
    watcher: &SimPluginWatcher,
    plugin: &Plugin,
    resource: &str,
    count: u64,
) -> WatchedPlugin {
    watcher
        .wait_registered(resource, count, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", watcher.state(), plugin.log()))
}

async fn wait_ready(addr: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while http_get(addr, "/readyz").await.map(|a| a.0).unwrap_or(0) != 200 {
        assert!(tokio::time::Instant::now() < deadline, "never ready");
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn every_resource_registers_through_the_plugin_watcher_and_is_admitted() {
    let world = World::new();
    two_resources(&world);
    let watcher = world.watcher().await;
    let addr = free_addr();
    let mut plugin =
        world.spawn_with(&["--registration", "plugin-watcher", "--metrics-addr", &addr]);

    let fuse = watcher.wait_registered(FUSE, 1, WAIT).await.unwrap();
    let tun = watcher.wait_registered(TUN, 1, WAIT).await.unwrap();
    assert_eq!(fuse.info.r#type, "DevicePlugin");
    assert_eq!(fuse.info.supported_versions, ["v1beta1"]);
    // The endpoint is the device-plugin socket, as an absolute path.
    assert_eq!(
        Path::new(&fuse.info.endpoint),
        world.plugins().join("fuse.sock")
    );
    assert_eq!(fuse.socket, world.registry().join("fuse-reg.sock"));
    assert!(tun.options.pre_start_required);
    assert_eq!(fuse.devices.len(), 2);

    let (ids, response) = watcher.admit(FUSE, 1).await.unwrap();
    assert_eq!(response.devices.len(), 1, "{response:?}");
    assert_eq!(response.devices[0].host_path, "/dev/fuse");
    assert_eq!(ids.len(), 1);
    watcher.admit(TUN, 1).await.unwrap();

    // No kubelet.sock was ever there: nothing called Register.
    assert!(!world.plugins().join("kubelet.sock").exists());
    wait_ready(&addr).await;
    wait_metric(
        &addr,
        &format!(
            "wasm_device_plugin_registrations_total{{resource=\"{FUSE}\",result=\"success\"}}"
        ),
        |n| n >= 1.0,
    )
    .await;
    let log = plugin
        .wait_for_log("registered with the kubelet through the plugin watcher")
        .await;
    assert!(log.contains("path=plugin-watcher"), "{log}");
    assert!(
        watcher.state().failures.is_empty(),
        "{:?}",
        watcher.state().failures
    );

    // Shutting down deregisters: the registration sockets go, and the
    // kubelet (here its stand-in) forgets the resources.
    assert!(plugin.terminate().await.success());
    assert!(!world.registry().join("fuse-reg.sock").exists());
    assert!(!world.registry().join("tun-reg.sock").exists());
    watcher
        .wait_for("deregistration", WAIT, |s| s.plugins.is_empty())
        .await
        .unwrap();
}

#[tokio::test]
async fn kubelet_restarts_are_recovered_on_the_plugin_watcher_path() {
    let world = World::new();
    two_resources(&world);
    let mut watcher = world.watcher().await;
    let plugin = world.spawn_with(&["--registration", "plugin-watcher"]);
    registered(&watcher, &plugin, FUSE, 1).await;
    registered(&watcher, &plugin, TUN, 1).await;

    // A restart that cleans the registry folder: the sockets come back
    // and every resource registers with the new kubelet.
    watcher.restart().await.unwrap();
    assert!(watcher.state().plugins.is_empty());
    let fuse = registered(&watcher, &plugin, FUSE, 1).await;
    registered(&watcher, &plugin, TUN, 1).await;
    assert!(world.registry().join("fuse-reg.sock").exists());
    assert_eq!(fuse.devices.len(), 2);
    watcher.admit(FUSE, 2).await.unwrap();

    // The device manager of a restarting kubelet deletes the device-plugin
    // sockets: both sockets are served anew and the resource registers again.
    for socket in world.plugin_sockets() {
        std::fs::remove_file(world.plugins().join(socket)).unwrap();
    }
    let again = registered(&watcher, &plugin, FUSE, 2).await;
    assert!(
        again.registered_at > fuse.registered_at,
        "{:?}\n{}",
        watcher.state(),
        plugin.log()
    );
    assert!(world.plugins().join("fuse.sock").exists());
    registered(&watcher, &plugin, TUN, 2).await;
    assert!(
        watcher.state().failures.is_empty(),
        "{:?}",
        watcher.state().failures
    );
}

#[tokio::test]
async fn a_refusal_is_logged_with_its_reason_and_retried_on_the_next_kubelet_start() {
    let world = World::new();
    two_resources(&world);
    let mut watcher = world.watcher().await;
    watcher.refuse(Some("device manager is shutting down (test)"));
    let addr = free_addr();
    let mut plugin =
        world.spawn_with(&["--registration", "plugin-watcher", "--metrics-addr", &addr]);

    watcher
        .wait_for("two refusals", WAIT, |s| s.refused.len() >= 2)
        .await
        .unwrap();
    let log = plugin
        .wait_for_log("device manager is shutting down (test)")
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("device manager is shutting down (test)"))
        .unwrap();
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("refused"), "{line}");
    wait_metric(
        &addr,
        &format!(
            "wasm_device_plugin_registrations_total{{resource=\"{FUSE}\",result=\"failure\"}}"
        ),
        |n| n >= 1.0,
    )
    .await;
    assert_eq!(http_get(&addr, "/readyz").await.unwrap().0, 503);

    // The next kubelet accepts.
    watcher.refuse(None);
    watcher.restart().await.unwrap();
    watcher.wait_registered(FUSE, 1, WAIT).await.unwrap();
    watcher.wait_registered(TUN, 1, WAIT).await.unwrap();
    wait_ready(&addr).await;
    // Still the same process: a refusal never crashes the host.
    assert!(plugin.wait(std::time::Duration::ZERO).await.is_none());
}

#[tokio::test]
async fn auto_takes_the_plugin_watcher_only_when_its_folder_exists() {
    // No registry folder: kubelet.sock.
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let plugin = world.spawn();
    kubelet
        .wait_registered(FUSE, 1, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}: {:?}\n{}", kubelet.state(), plugin.log()));
    let log = plugin.wait_for_log("registration path").await;
    assert!(log.contains("path=kubelet"), "{log}");
    assert!(!world.registry().exists());

    // The folder exists: the plugin watcher, and kubelet.sock is left alone.
    let world = World::new();
    two_resources(&world);
    let kubelet = world.kubelet().await;
    let watcher = world.watcher().await;
    let plugin = world.spawn_with(&["--registration", "auto"]);
    watcher.wait_registered(FUSE, 1, WAIT).await.unwrap();
    watcher.wait_registered(TUN, 1, WAIT).await.unwrap();
    let log = plugin.wait_for_log("registration path").await;
    assert!(log.contains("path=plugin-watcher"), "{log}");
    assert!(kubelet.state().plugins.is_empty());
}

#[tokio::test]
async fn the_kubelets_socket_path_authority_gets_an_answer() {
    let world = World::new();
    two_resources(&world);
    std::fs::create_dir_all(world.registry()).unwrap();
    let plugin = world.spawn_with(&["--registration", "plugin-watcher"]);
    plugin.wait_for_log("serving the registration socket").await;
    let socket = world.registry().join("fuse-reg.sock");
    plugin.wait_for_log(&socket.display().to_string()).await;

    // Exactly what the kubelet sends: grpc-go's percent-encoded path, the
    // second call on the connection naming it from the HPACK table.
    let authority = grpc_go_authority(&socket);
    assert!(authority.starts_with("%2F"), "{authority}");
    let mut conn = KubeletStyleConn::connect(&socket).await.unwrap();
    for _ in 0..2 {
        let info: PluginInfo = conn.unary(GET_INFO, &InfoRequest {}, WAIT).await.unwrap();
        assert_eq!(info.name, FUSE);
        assert_eq!(info.r#type, "DevicePlugin");
    }
    // A long-lived connection, as the kubelet's connection monitor keeps
    // (GetInfo every 10 s): the HPACK table fills and evicts, and every
    // call is still answered.
    for _ in 0..300 {
        let info: PluginInfo = conn.unary(GET_INFO, &InfoRequest {}, WAIT).await.unwrap();
        assert_eq!(info.name, FUSE);
    }
    // Older grpc-go sent the path verbatim.
    let raw = socket.display().to_string();
    let mut conn = KubeletStyleConn::connect_with_authority(&socket, raw)
        .await
        .unwrap();
    let info: PluginInfo = conn.unary(GET_INFO, &InfoRequest {}, WAIT).await.unwrap();
    assert_eq!(info.name, FUSE);
}

/// The trap is real: a plain tonic server resets the same request.
#[tokio::test]
async fn a_plain_tonic_server_resets_the_kubelets_request() {
    struct Plain;
    #[tonic::async_trait]
    impl Registration for Plain {
        async fn get_info(
            &self,
            _: tonic::Request<InfoRequest>,
        ) -> Result<tonic::Response<PluginInfo>, tonic::Status> {
            Ok(tonic::Response::new(PluginInfo::default()))
        }
        async fn notify_registration_status(
            &self,
            _: tonic::Request<RegistrationStatus>,
        ) -> Result<tonic::Response<RegistrationStatusResponse>, tonic::Status> {
            Ok(tonic::Response::new(RegistrationStatusResponse {}))
        }
    }
    let world = World::new();
    std::fs::create_dir_all(world.registry()).unwrap();
    let socket = world.registry().join("plain.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(RegistrationServer::new(Plain))
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let mut conn = KubeletStyleConn::connect(&socket).await.unwrap();
    let answer = conn
        .unary::<_, PluginInfo>(GET_INFO, &InfoRequest {}, WAIT)
        .await;
    assert!(matches!(answer, Err(DialError::Reset(1))), "{answer:?}");
}

#[tokio::test]
async fn check_and_test_name_the_registration_path_per_resource() {
    let world = World::new();
    two_resources(&world);
    let (config, root, plugins, registry) = (
        world.config(),
        world.root(),
        world.plugins(),
        world.registry(),
    );
    let common = [
        "--config-dir",
        config.to_str().unwrap(),
        "--host-root",
        root.to_str().unwrap(),
        "--device-plugin-dir",
        plugins.to_str().unwrap(),
        "--plugins-registry-dir",
        registry.to_str().unwrap(),
    ];
    // auto, no registry folder: kubelet.sock.
    for command in ["check", "test"] {
        let mut args = vec![command];
        args.extend_from_slice(&common);
        let (code, out, err) = run_to_end(&args);
        assert_eq!(code, 0, "{out}{err}");
        let expected = format!(
            "registration: kubelet (Register on {}, endpoint fuse.sock)",
            plugins.join("kubelet.sock").display()
        );
        assert!(out.contains(&expected), "{command}: {out}");
    }
    // The folder exists: the plugin watcher, with both paths named.
    std::fs::create_dir_all(&registry).unwrap();
    for command in ["check", "test"] {
        let mut args = vec![command];
        args.extend_from_slice(&common);
        let (code, out, err) = run_to_end(&args);
        assert_eq!(code, 0, "{out}{err}");
        let expected = format!(
            "registration: plugin-watcher ({} answers GetInfo, endpoint {})",
            registry.join("tun-reg.sock").display(),
            plugins.join("tun.sock").display()
        );
        assert!(out.contains(&expected), "{command}: {out}");
    }
}

#[tokio::test]
async fn changed_options_reach_the_kubelet_through_the_plugin_watcher() {
    let world = World::new();
    two_resources(&world);
    let watcher = world.watcher().await;
    let plugin = world.spawn_with(&["--registration", "plugin-watcher"]);
    let tun = registered(&watcher, &plugin, TUN, 1).await;
    assert!(tun.options.pre_start_required);

    // The kubelet reads options when it connects: a live edit serves a new
    // registration socket, and the kubelet connects again.
    world.write_config(
        "tun.toml",
        &format!(
            "version = 1\nresource = \"{TUN}\"\nsocket = \"tun.sock\"\n[[nodes]]\npath = \"/dev/net/tun\"\n"
        ),
    );
    let state = watcher
        .wait_for("new TUN options", WAIT, |s| {
            s.plugins
                .get(TUN)
                .is_some_and(|p| !p.options.pre_start_required && p.lists_received > 0)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}: {:#?}\n{}", watcher.state(), plugin.log()));
    assert!(state.registrations[TUN] >= 2);
    watcher.admit(TUN, 1).await.unwrap();
}
