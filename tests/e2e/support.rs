//! Test harness: fixture trees, config directories and the plugin process.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use wdp_kubelet_sim::{SimKubelet, SimPluginWatcher};
use wdp_test_support::eventually;
use wdp_test_support::fixtures::{copy_fixture, write_under_root};
pub use wdp_test_support::read_cdi_spec;

/// Generous bound for events that normally take milliseconds.
pub const WAIT: Duration = Duration::from_secs(15);

/// The plugin binary: cargo's build of it, or `WDP_E2E_BINARY` (a copy
/// taken right after building, where several checkouts share one target
/// folder and may rebuild cargo's copy meanwhile).
pub fn binary() -> &'static str {
    static BINARY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        std::env::var("WDP_E2E_BINARY")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_wasm-device-plugin").to_owned())
    })
}

/// A scratch world: host root, config dir and device-plugin folder.
pub struct World {
    pub tmp: TempDir,
}

impl World {
    pub fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("wdp-e2e-")
            .tempdir()
            .unwrap();
        for d in ["root/dev", "config", "plugins"] {
            std::fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        Self { tmp }
    }

    pub fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub fn config(&self) -> PathBuf {
        self.tmp.path().join("config")
    }

    pub fn plugins(&self) -> PathBuf {
        self.tmp.path().join("plugins")
    }

    /// The plugin watcher's registry folder; absent until a test makes it
    /// (so `--registration auto` takes kubelet.sock by default).
    pub fn registry(&self) -> PathBuf {
        self.tmp.path().join("plugins_registry")
    }

    /// A plugin-watcher stand-in on [`registry`](Self::registry) (created).
    pub async fn watcher(&self) -> SimPluginWatcher {
        SimPluginWatcher::start(self.registry()).await.unwrap()
    }

    /// A world whose host root is a copy of `tests/fixtures/<fixture>`, so
    /// a test may unplug and re-plug its hardware.
    pub fn from_fixture(fixture: &str) -> Self {
        let world = Self::new();
        copy_fixture(fixture, &world.root());
        world
    }

    /// Copies a built guest into `config/guests/<name>`.
    pub fn install_guest(&self, built: &str, name: &str) {
        let dir = self.config().join("guests");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(built, dir.join(name)).unwrap();
    }

    /// Creates a fake device node (a regular file) at host path `path`.
    pub fn add_node(&self, path: &str) {
        write_under_root(&self.root(), path, b"");
    }

    pub fn remove_node(&self, path: &str) {
        std::fs::remove_file(self.root().join(path.trim_start_matches('/'))).unwrap();
    }

    /// Writes a config file atomically (write + rename), as editors and
    /// ConfigMap updates do.
    pub fn write_config(&self, name: &str, text: &str) {
        let tmp = self.config().join(format!(".{name}.tmp"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(tmp, self.config().join(name)).unwrap();
    }

    pub async fn kubelet(&self) -> SimKubelet {
        SimKubelet::start(self.plugins()).await.unwrap()
    }

    pub fn spawn(&self) -> Plugin {
        self.spawn_with(&[])
    }

    /// Runs the plugin on this world with extra arguments.
    pub fn spawn_with(&self, extra: &[&str]) -> Plugin {
        let (config, plugins, root, registry) =
            (self.config(), self.plugins(), self.root(), self.registry());
        let mut args = vec![
            "run",
            "--config-dir",
            config.to_str().unwrap(),
            "--device-plugin-dir",
            plugins.to_str().unwrap(),
            "--host-root",
            root.to_str().unwrap(),
            "--plugins-registry-dir",
            registry.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        // The world's own state folder (the last good snapshot, the set
        // record), unless the test names one.
        let state = self.tmp.path().join("state");
        if !extra.contains(&"--state-dir") {
            args.extend(["--state-dir", state.to_str().unwrap()]);
        }
        Plugin::spawn(&args, self.tmp.path())
    }

    /// Sockets currently in the device-plugin folder, kubelet.sock excluded.
    pub fn plugin_sockets(&self) -> Vec<String> {
        use std::os::unix::fs::FileTypeExt;
        let mut names: Vec<String> = std::fs::read_dir(self.plugins())
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_socket()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "kubelet.sock")
            .collect();
        names.sort();
        names
    }
}

/// The plugin process; killed when dropped.
pub struct Plugin {
    child: tokio::process::Child,
    log: PathBuf,
}

impl Plugin {
    pub fn spawn(args: &[&str], dir: &Path) -> Self {
        Self::spawn_wrapped(&[], args, dir)
    }

    /// Runs the binary as the last argument of `wrapper` (e.g. `unshare …
    /// sh -c '…; exec "$@"' sh`), `args` after it; the process keeps the
    /// wrapper's PID when the wrapper execs.
    pub fn spawn_wrapped(wrapper: &[&str], args: &[&str], dir: &Path) -> Self {
        Self::spawn_binary(binary(), wrapper, args, dir)
    }

    /// As [`spawn_wrapped`](Self::spawn_wrapped), running `program` instead
    /// of this build's binary (another release's, for a rollback).
    pub fn spawn_binary(program: &str, wrapper: &[&str], args: &[&str], dir: &Path) -> Self {
        // One log per process, even for two started with as many arguments.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = dir.join(format!("plugin-{n}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let mut command = match wrapper.split_first() {
            Some((wrapping, rest)) => {
                let mut command = tokio::process::Command::new(wrapping);
                command.args(rest).arg(program);
                command
            }
            None => tokio::process::Command::new(program),
        };
        let child = command
            .args(args)
            .env("RUST_LOG", "info,wdp_host=debug,wdp_resource=debug,wdp_device_plugin=debug,wdp_dra_driver=debug,wdp_kubelet_socket=debug")
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self { child, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `needle` in a complete line; returns the
    /// complete lines. (A file has no awaitable "appended" event, so this
    /// polls at a short interval, bounded by [`WAIT`].)
    pub async fn wait_for_log(&self, needle: &str) -> String {
        eventually(WAIT, Duration::from_millis(10), async || {
            let log = self.log();
            let complete = &log[..log.rfind('\n').map_or(0, |i| i + 1)];
            if complete.contains(needle) {
                Ok(complete.to_owned())
            } else {
                Err(format!("{needle:?} never logged:\n{log}"))
            }
        })
        .await
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("plugin still running")
    }

    /// Sends SIGTERM and waits for the exit.
    pub async fn terminate(&mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.wait(WAIT)
            .await
            .expect("plugin did not exit after SIGTERM")
    }

    /// Waits for the process to exit, at most `limit`.
    pub async fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(Result::unwrap)
    }
}

/// Runs the binary to completion and returns (exit code, stdout, stderr).
pub fn run_to_end(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(binary()).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The DRA device name of the fixture node `node` (`/dev/…`), by the
/// documented rule.
pub fn name_of(node: &str) -> String {
    wdp_k8s_naming::device_name(node.trim_start_matches("/dev/")).unwrap()
}

/// A loopback address with a port that was free a moment ago.
pub fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET path` over HTTP/1.0; returns (status code, body).
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw).await?;
    let code = raw
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of the sample `series` (name with labels) in a scrape.
pub fn metric_value(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// Polls `/metrics` until the sample `series` satisfies `condition`.
pub async fn wait_metric(addr: &str, series: &str, condition: impl Fn(f64) -> bool) -> f64 {
    eventually(WAIT, Duration::from_millis(20), async || {
        if let Ok((200, body)) = http_get(addr, "/metrics").await
            && let Some(value) = metric_value(&body, series)
            && condition(value)
        {
            return Ok(value);
        }
        Err(format!("metric {series} never reached the expected value"))
    })
    .await
}
