//! One node's side: a host root (a copy of a fixture tree, or device nodes
//! made here), a config directory with the repository's example guests, the
//! simulated DRA kubelet (the kubelet stand-in until tier 3), and the
//! `wasm-device-plugin` binary this build made, authenticated to the real
//! API server by its ServiceAccount's token.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// The repository's root.
pub fn repo() -> PathBuf {
    wdp_test_support::fixtures::repo_root()
}

/// A node's folders: `root/` (its `/`), `config/`, the kubelet's folders
/// and the host's state.
pub struct Node {
    pub name: String,
    pub tmp: TempDir,
}

impl Node {
    /// A node named `name` whose root is empty but for `/dev`.
    pub fn new(name: &str) -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("wdp-cluster-node-")
            .tempdir()
            .unwrap();
        for dir in [
            "root/dev",
            "config",
            "plugins",
            "plugins_registry",
            "kubelet-plugins",
            "cdi",
            "state",
        ] {
            std::fs::create_dir_all(tmp.path().join(dir)).unwrap();
        }
        Self {
            name: name.to_owned(),
            tmp,
        }
    }

    /// A node whose root is a copy of `tests/fixtures/<fixture>`.
    pub fn from_fixture(name: &str, fixture: &str) -> Self {
        let node = Self::new(name);
        wdp_test_support::fixtures::copy_fixture(fixture, &node.root());
        node
    }

    pub fn root(&self) -> PathBuf {
        self.tmp.path().join("root")
    }

    pub fn config(&self) -> PathBuf {
        self.tmp.path().join("config")
    }

    pub fn registry(&self) -> PathBuf {
        self.tmp.path().join("plugins_registry")
    }

    pub fn plugins(&self) -> PathBuf {
        self.tmp.path().join("plugins")
    }

    pub fn cdi(&self) -> PathBuf {
        self.tmp.path().join("cdi")
    }

    /// An empty file standing for a device node (`/dev/loop4`, say).
    pub fn add_device_node(&self, path: &str) {
        wdp_test_support::fixtures::write_under_root(&self.root(), path, b"");
    }

    /// Copies the TOML files of `config_dir` (relative to the repository)
    /// into this node's config directory, every guest path pointing at the
    /// repository's built example guests (`config/guests/`, from
    /// `guests/build.sh` and `guests/polyglot/build.sh`).
    pub fn install_config(&self, config_dir: &str) {
        let guests = repo().join("config/guests");
        let guests = guests.canonicalize().unwrap_or(guests);
        let guests = format!("\"{}/", guests.display());
        for entry in std::fs::read_dir(repo().join(config_dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path)
                    .unwrap()
                    .replace("\"../../guests/", &guests)
                    .replace("\"guests/", &guests);
                std::fs::write(self.config().join(path.file_name().unwrap()), text).unwrap();
            }
        }
    }

    /// Writes `text` to `config/<name>`.
    pub fn write_config(&self, name: &str, text: &str) {
        let path = self.config().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// `run` on this node's folders, reaching the API server with
    /// `kubeconfig`.
    pub fn spawn_host(&self, kubeconfig: &Path, extra: &[&str]) -> HostProcess {
        self.spawn_host_reading(&self.config(), kubeconfig, extra)
    }

    /// As [`spawn_host`](Self::spawn_host), reading the config directory
    /// `config` (another pod's of a rolling update).
    pub fn spawn_host_reading(
        &self,
        config: &Path,
        kubeconfig: &Path,
        extra: &[&str],
    ) -> HostProcess {
        let tmp = self.tmp.path();
        let mut args: Vec<String> = vec!["run".into()];
        for (flag, dir) in [
            ("--config-dir", config.to_owned()),
            ("--device-plugin-dir", self.plugins()),
            ("--host-root", self.root()),
            ("--plugins-registry-dir", self.registry()),
            ("--cdi-dir", self.cdi()),
            ("--plugins-dir", tmp.join("kubelet-plugins")),
            ("--state-dir", tmp.join("state")),
            ("--kubeconfig", kubeconfig.to_owned()),
        ] {
            args.push(flag.into());
            args.push(dir.display().to_string());
        }
        args.push("--node-name".into());
        args.push(self.name.clone());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        HostProcess::spawn(&args, tmp)
    }

    /// `test` on this node's config and root: the layout the host says it
    /// publishes, one line per device and slice.
    pub fn test_output(&self) -> String {
        let output = Command::new(binary())
            .args(["test", "--config-dir"])
            .arg(self.config())
            .arg("--host-root")
            .arg(self.root())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "test: {text}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        text
    }
}

/// The host binary this build made.
pub fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_wasm-device-plugin")
}

/// A running `wasm-device-plugin run`; killed when dropped.
pub struct HostProcess {
    child: tokio::process::Child,
    log: PathBuf,
}

impl HostProcess {
    fn spawn(args: &[String], dir: &Path) -> Self {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = dir.join(format!("host-{n}.log"));
        let file = std::fs::File::create(&log).unwrap();
        let child = tokio::process::Command::new(binary())
            .args(args)
            .env(
                "RUST_LOG",
                "info,wdp_host=debug,wdp_dra_driver=debug,wdp_dra_client=debug",
            )
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

    /// Waits until the log holds a line with `needle`; returns the log.
    /// (A file has no awaitable "appended" event: polled every 20 ms.)
    pub async fn wait_for_log(&self, needle: &str, limit: Duration) -> String {
        let started = Instant::now();
        loop {
            let log = self.log();
            if log.lines().any(|line| line.contains(needle)) {
                return log;
            }
            assert!(started.elapsed() < limit, "{needle:?} never logged:\n{log}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then waits for the exit.
    pub async fn terminate(&mut self) {
        let pid = self.child.id().expect("the host still runs");
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("the host did not exit after SIGTERM")
            .unwrap();
    }

    /// Lines at WARN or ERROR (the host's default format puts the level
    /// after the timestamp).
    pub fn problems(&self) -> Vec<String> {
        self.log()
            .lines()
            .filter(|line| line.contains(" ERROR ") || line.contains(" WARN "))
            .map(str::to_owned)
            .collect()
    }
}
