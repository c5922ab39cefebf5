//! Shared by the benches that run the real binary: the shipped
//! configuration laid out in a temporary folder with a fixture host root,
//! the binary to run, and readings of a child process's `/proc` files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

// Each bench that includes this module uses some of them.
#[allow(unused_imports)]
pub use wdp_test_support::measure::{cpu_time, ms, percentile, status_kib};

/// The resources of the shipped `config/` directory.
pub const SHIPPED_RESOURCES: [&str; 4] = [
    "wasm-device-plugin.io/fuse",
    "wasm-device-plugin.io/kvm",
    "wasm-device-plugin.io/loop",
    "wasm-device-plugin.io/tun",
];

/// The folders one bench host uses.
pub struct Layout {
    /// Keeps the folders alive.
    pub tmp: tempfile::TempDir,
    /// The fixture host root (`--host-root`).
    pub root: PathBuf,
    /// The config directory.
    pub config: PathBuf,
    /// The device-plugin folder.
    pub plugins: PathBuf,
    /// The CDI folder (`--cdi-dir`): beside the others unless moved
    /// ([`Layout::with_cdi_on_tmpfs`]).
    pub cdi: PathBuf,
    /// Keeps a CDI folder on tmpfs alive.
    cdi_tmp: Option<tempfile::TempDir>,
}

impl Layout {
    /// Empty folders.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let (root, config, plugins) = (
            tmp.path().join("root"),
            tmp.path().join("config"),
            tmp.path().join("plugins"),
        );
        for d in [&root.join("dev/net"), &config.join("guests"), &plugins] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            cdi: tmp.path().join("cdi"),
            cdi_tmp: None,
            tmp,
            root,
            config,
            plugins,
        }
    }

    /// The same layout with its CDI folder on tmpfs (`/dev/shm`), as a
    /// node's `/var/run/cdi` is (`/run` is tmpfs), while the state folder
    /// stays on disk.
    pub fn with_cdi_on_tmpfs(mut self) -> Self {
        let tmp = tempfile::tempdir_in("/dev/shm").unwrap();
        self.cdi = tmp.path().join("cdi");
        self.cdi_tmp = Some(tmp);
        self
    }

    /// The repository's shipped `config/` (its `*.toml` files) with the
    /// example guests it names (built by the guest-artifacts crate), and a
    /// host root with the nodes they select: `/dev/fuse`, `/dev/kvm`,
    /// `/dev/net/tun` and eight loop devices.
    pub fn shipped() -> Self {
        let layout = Self::new();
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        for entry in std::fs::read_dir(&shipped).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                std::fs::copy(&path, layout.config.join(path.file_name().unwrap())).unwrap();
            }
        }
        for (name, built) in [
            ("presence-health.wasm", wdp_guest_artifacts::PRESENCE_HEALTH),
            ("numa-packing.wasm", wdp_guest_artifacts::NUMA_PACKING),
            ("allocate-shaper.wasm", wdp_guest_artifacts::ALLOCATE_SHAPER),
            ("pre-start-check.wasm", wdp_guest_artifacts::PRE_START_CHECK),
        ] {
            std::fs::copy(built, layout.config.join("guests").join(name)).unwrap();
        }
        let mut nodes = vec![
            "dev/fuse".to_owned(),
            "dev/kvm".into(),
            "dev/net/tun".into(),
        ];
        nodes.extend((0..8).map(|i| format!("dev/loop{i}")));
        for node in nodes {
            std::fs::write(layout.root.join(node), b"").unwrap();
        }
        layout
    }

    /// `run` on this layout, logging only errors (plus `extra` arguments);
    /// on the CPUs `WDP_BENCH_HOST_CPUS` names, if set (see [`host_cpus`]).
    pub fn run(&self, extra: &[&str]) -> tokio::process::Child {
        let mut command = match host_cpus() {
            // taskset execs the host: the child's PID is the host's.
            Some(cpus) => {
                let mut taskset = tokio::process::Command::new("taskset");
                taskset.args(["-c", &cpus, &binary()]);
                taskset
            }
            None => tokio::process::Command::new(binary()),
        };
        command
            .args(["run", "--registration", "kubelet", "--config-dir"])
            .arg(&self.config)
            .arg("--device-plugin-dir")
            .arg(&self.plugins)
            .arg("--host-root")
            .arg(&self.root)
            .arg("--cdi-dir")
            .arg(&self.cdi)
            .args(extra)
            .env("RUST_LOG", "error")
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }
}

impl Layout {
    /// `run` with the DRA side on: the plugins registry `registry` (where
    /// the DRA kubelet stand-in watches), the API server `kubeconfig`
    /// names, node `node`, and a state and kubelet-plugins folder of its
    /// own beside the others.
    pub fn run_dra(&self, registry: &Path, kubeconfig: &Path, node: &str) -> tokio::process::Child {
        let state = self.tmp.path().join("state");
        let plugins_dir = self.tmp.path().join("kubelet-plugins");
        self.run(&[
            "--plugins-registry-dir",
            registry.to_str().unwrap(),
            "--plugins-dir",
            plugins_dir.to_str().unwrap(),
            "--state-dir",
            state.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--node-name",
            node,
        ])
    }
}

/// `WDP_BENCH_HOST_CPUS` (a `taskset -c` list such as `0,1`): the CPUs the
/// host runs on, so that on a machine with more cores the host gets two of
/// its own and the bench (pinned elsewhere by the caller, `taskset -c 2-7
/// cargo bench …`) does not compete with it. Unset: the host shares the
/// machine's cores with the bench.
pub fn host_cpus() -> Option<String> {
    std::env::var("WDP_BENCH_HOST_CPUS")
        .ok()
        .filter(|cpus| !cpus.is_empty())
}

/// What the host runs on, for a bench's heading.
pub fn host_cpus_heading() -> String {
    match host_cpus() {
        Some(cpus) => format!("host on CPUs {cpus} of its own"),
        None => format!(
            "host and bench sharing {} cores",
            std::thread::available_parallelism().map_or(0, usize::from)
        ),
    }
}

/// The binary measured: `WDP_BENCH_BINARY` or the one cargo built.
pub fn binary() -> String {
    std::env::var("WDP_BENCH_BINARY")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_wasm-device-plugin").to_owned())
}

/// Share of one core the process used over `window`.
pub async fn idle_cpu_share(pid: u32, window: Duration) -> f64 {
    let before = cpu_time(pid);
    tokio::time::sleep(window).await;
    let used = cpu_time(pid).saturating_sub(before);
    used.as_secs_f64() / window.as_secs_f64()
}

/// Where the CPU went during a stretch of a bench: the host's, this
/// process's (bench client and in-process servers) and the whole
/// machine's busy share (all cores, from `/proc/stat`).
pub struct CpuSplit {
    host_pid: u32,
    host: Duration,
    bench: Duration,
    machine: (u64, u64),
}

/// Busy and total jiffies of all cores so far.
fn machine_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait are the 4th and 5th.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

impl CpuSplit {
    /// Starts counting.
    pub fn start(host_pid: u32) -> Self {
        Self {
            host_pid,
            host: cpu_time(host_pid),
            bench: cpu_time(std::process::id()),
            machine: machine_jiffies(),
        }
    }

    /// `host X ms, bench Y ms per claim; machine Z % busy` since the start,
    /// over `claims` claims.
    pub fn per_claim(&self, claims: usize) -> String {
        let per = |d: Duration| ms(d) / claims.max(1) as f64;
        let host = cpu_time(self.host_pid).saturating_sub(self.host);
        let bench = cpu_time(std::process::id()).saturating_sub(self.bench);
        let (busy, total) = machine_jiffies();
        let busy_share =
            (busy - self.machine.0) as f64 / (total - self.machine.1).max(1) as f64 * 100.0;
        format!(
            "CPU per claim: host {:.2} ms, bench client and API server {:.2} ms; machine {busy_share:.0} % busy",
            per(host),
            per(bench)
        )
    }
}
