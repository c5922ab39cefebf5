//! The binary run the way the shipped DaemonSet runs it: every capability
//! dropped (bounding, inheritable and ambient sets emptied, so uid 0 holds
//! none after exec) and `no_new_privs` set, through `setpriv` from
//! util-linux. It must still register, admit through guests, reload live,
//! survive a kubelet restart and serve its probes and metrics.
//!
//! CDI spec writes do not exist in the host yet; when they do, this file
//! gets a case writing a spec under a folder owned by root, as
//! `/var/run/cdi` is.
//!
//! `WDP_IMAGE_ROOTFS=<unpacked image>` makes
//! `shipped_config_gets_ready_without_capabilities` run the image's own
//! binary and config (`/usr/local/bin/wasm-device-plugin`,
//! `/etc/wasm-device-plugin/config` under that folder) instead of the ones
//! cargo built; CI does that after building the image.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{WAIT, World, free_addr, wait_metric};

const FUSE: &str = "confined.example.com/fuse";
const EXTRA: &str = "confined.example.com/tun";

/// Whether this test process runs as uid 0 (as CI and the pod do).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().next().map(|uid| uid == "0"))
        .unwrap()
}

/// A process started through setpriv with every capability dropped.
struct Confined {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Confined {
    fn spawn(binary: &Path, args: &[&str], log: PathBuf) -> Self {
        let mut setpriv = tokio::process::Command::new("setpriv");
        setpriv.args(["--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all"]);
        if running_as_root() {
            // Only a process holding CAP_SETPCAP may shrink the bounding
            // set; for uid 0 it is what leaves no capability after exec.
            setpriv.arg("--bounding-set=-all");
        }
        let file = std::fs::File::create(&log).unwrap();
        let child = setpriv
            .arg("--")
            .arg(binary)
            .args(args)
            .env("RUST_LOG", "info,wdp_host=debug,wdp_resource=debug,wdp_device_plugin=debug,wdp_dra_driver=debug,wdp_kubelet_socket=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .expect("setpriv (util-linux) runs the plugin with capabilities dropped");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The kernel's view of the running plugin: (CapEff, CapPrm, CapBnd,
    /// NoNewPrivs) from /proc/<pid>/status.
    fn privileges(&self) -> (u64, u64, u64, bool) {
        let pid = self.child.id().expect("plugin running");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_else(|| panic!("{name} missing in /proc/{pid}/status"))
                .to_owned()
        };
        let caps = |name: &str| u64::from_str_radix(&field(name), 16).unwrap();
        (
            caps("CapEff:"),
            caps("CapPrm:"),
            caps("CapBnd:"),
            field("NoNewPrivs:") == "1",
        )
    }

    /// The binary the process runs, as the kernel sees it.
    fn exe(&self) -> PathBuf {
        std::fs::read_link(format!("/proc/{}/exe", self.child.id().unwrap())).unwrap()
    }
}

/// `GET path` with an `Accept` header; returns (status, content type, body).
async fn http_get_accept(addr: &str, path: &str, accept: &str) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_owned())
        })
        .unwrap_or_default();
    (code, content_type, body.to_owned())
}

/// Polls `/readyz` until it answers 200 (the event is an HTTP state, so it
/// is polled at a short interval, bounded by [`WAIT`]).
async fn wait_ready(addr: &str, plugin: &Confined) -> Instant {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut interval = tokio::time::interval(Duration::from_millis(5));
    loop {
        interval.tick().await;
        if let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let request = format!("GET /readyz HTTP/1.0\r\nHost: {addr}\r\n\r\n");
            let mut raw = String::new();
            if stream.write_all(request.as_bytes()).await.is_ok()
                && stream.read_to_string(&mut raw).await.is_ok()
                && raw.starts_with("HTTP/1.0 200")
            {
                return Instant::now();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never answered 200:\n{}",
            plugin.log()
        );
    }
}

fn fuse_config(replicas: u32) -> String {
    format!(
        "version = 1\nresource = \"{FUSE}\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = {replicas}\n\
         [hooks.allocate]\nguest = \"guests/shaper.wasm\"\n[guest-config]\nenv-prefix = \"FUSE\"\n"
    )
}

#[tokio::test]
async fn registers_admits_and_reloads_with_every_capability_dropped() {
    let world = World::new();
    world.add_node("/dev/fuse");
    world.add_node("/dev/net/tun");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "shaper.wasm");
    world.write_config("fuse.toml", &fuse_config(4));
    let mut kubelet = world.kubelet().await;
    let addr = free_addr();
    let (config, plugins, root) = (world.config(), world.plugins(), world.root());
    let plugin = Confined::spawn(
        Path::new(crate::support::binary()),
        &[
            "run",
            "--config-dir",
            config.to_str().unwrap(),
            "--device-plugin-dir",
            plugins.to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
            "--metrics-addr",
            &addr,
        ],
        world.tmp.path().join("confined.log"),
    );

    // Registration: the plugin created its socket and called Register.
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    // Registered means the binary itself runs now (setpriv has exec'd).
    let (effective, permitted, bounding, no_new_privs) = plugin.privileges();
    assert_eq!(
        plugin.exe(),
        std::fs::canonicalize(crate::support::binary()).unwrap()
    );
    assert_eq!(effective, 0, "effective capabilities left");
    assert_eq!(permitted, 0, "permitted capabilities left");
    if running_as_root() {
        assert_eq!(bounding, 0, "bounding set not emptied");
    }
    assert!(no_new_privs, "no_new_privs not set");
    wait_ready(&addr, &plugin).await;

    // Admission through the allocate guest.
    let admission = kubelet.admit(FUSE, 1).await.unwrap();
    let response = &admission.response;
    // The guest ran with its guest-config (env-prefix FUSE).
    assert!(
        response.envs.contains_key("FUSE_VISIBLE_DEVICES"),
        "{response:?}"
    );
    assert!(
        response.devices.iter().any(|d| d.host_path == "/dev/fuse"),
        "{response:?}"
    );

    // Live reload: more replicas, and a new resource file that needs a new
    // socket in the kubelet's folder.
    world.write_config("fuse.toml", &fuse_config(6));
    kubelet
        .wait_devices(FUSE, WAIT, |devices| devices.len() == 6)
        .await
        .unwrap();
    world.write_config(
        "tun.toml",
        &format!(
            "version = 1\nresource = \"{EXTRA}\"\n[[nodes]]\npath = \"/dev/net/tun\"\nreplicas = 2\n"
        ),
    );
    kubelet.wait_registered(EXTRA, 1, WAIT).await.unwrap();
    kubelet.admit(EXTRA, 2).await.unwrap();
    wait_metric(
        &addr,
        "wasm_device_plugin_reloads_total{result=\"success\"}",
        |n| n >= 2.0,
    )
    .await;

    // A kubelet restart deletes every socket; the plugin serves and
    // registers again without any capability.
    kubelet.restart().await.unwrap();
    kubelet.wait_registered(FUSE, 1, WAIT).await.unwrap();
    kubelet.wait_registered(EXTRA, 1, WAIT).await.unwrap();
    kubelet.admit(FUSE, 1).await.unwrap();

    // Metrics: Prometheus text unless OpenMetrics is asked for.
    let (code, content_type, body) =
        http_get_accept(&addr, "/metrics", "text/plain;version=0.0.4").await;
    assert_eq!(code, 200);
    assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        body.contains("# TYPE wasm_device_plugin_allocated_devices_total counter"),
        "{body}"
    );
    assert!(!body.contains("# EOF"), "{body}");
    let (_, content_type, body) = http_get_accept(
        &addr,
        "/metrics",
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    )
    .await;
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(
        !plugin.log().contains("Operation not permitted"),
        "{}",
        plugin.log()
    );
}

/// The shipped config (every example guest, four resources) as the image
/// carries it, started without capabilities until `/readyz` answers 200.
#[tokio::test]
async fn shipped_config_gets_ready_without_capabilities() {
    let world = World::new();
    for node in [
        "/dev/fuse",
        "/dev/net/tun",
        "/dev/loop0",
        "/dev/loop1",
        "/dev/loop2",
        "/dev/loop3",
    ] {
        world.add_node(node);
    }
    let (binary, shipped) = match std::env::var_os("WDP_IMAGE_ROOTFS") {
        Some(rootfs) => {
            let rootfs = PathBuf::from(rootfs);
            (
                rootfs.join("usr/local/bin/wasm-device-plugin"),
                rootfs.join("etc/wasm-device-plugin/config"),
            )
        }
        None => {
            let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            (PathBuf::from(crate::support::binary()), repo.join("config"))
        }
    };
    // The config directory as a ConfigMap volume would hold it: the shipped
    // TOML files, and the example guests under guests/.
    for entry in std::fs::read_dir(&shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            std::fs::copy(&path, world.config().join(path.file_name().unwrap())).unwrap();
        }
    }
    let guests = shipped.join("guests");
    if std::env::var_os("WDP_IMAGE_ROOTFS").is_some() {
        for entry in std::fs::read_dir(&guests).unwrap() {
            let path = entry.unwrap().path();
            world.install_guest(
                path.to_str().unwrap(),
                path.file_name().unwrap().to_str().unwrap(),
            );
        }
    } else {
        for (package, built) in wdp_guest_artifacts::EXAMPLES {
            world.install_guest(built, &format!("{package}.wasm"));
        }
    }
    let mut resources: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(world.config()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        if let Some(name) = text
            .lines()
            .find_map(|l| l.strip_prefix("resource = "))
            .map(|v| v.trim_matches('"').to_owned())
        {
            resources.push(name);
        }
    }
    resources.sort();
    assert!(resources.len() >= 4, "{resources:?}");

    let kubelet = world.kubelet().await;
    let addr = free_addr();
    let (config, plugins, root) = (world.config(), world.plugins(), world.root());
    let started = Instant::now();
    let plugin = Confined::spawn(
        &binary,
        &[
            "run",
            "--config-dir",
            config.to_str().unwrap(),
            "--device-plugin-dir",
            plugins.to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
            "--metrics-addr",
            &addr,
        ],
        world.tmp.path().join("shipped.log"),
    );
    let ready = wait_ready(&addr, &plugin).await;
    println!(
        "{}: start to /readyz 200 with the shipped config ({} resources): {:.0} ms",
        binary.display(),
        resources.len(),
        (ready - started).as_secs_f64() * 1e3
    );
    assert_eq!(plugin.privileges().0, 0, "effective capabilities left");

    // Every resource with devices admits one container through its guests
    // (kvm's node is optional and absent from this host root).
    let mut admitted = 0;
    for resource in &resources {
        let record = kubelet.wait_registered(resource, 1, WAIT).await.unwrap();
        if !record.healthy_ids().is_empty() {
            let admission = kubelet.admit(resource, 1).await.unwrap();
            assert!(
                !admission.response.devices.is_empty(),
                "{resource}: {admission:?}"
            );
            admitted += 1;
        }
    }
    assert!(admitted >= 3, "only {admitted} of {resources:?} admitted");
}
