//! Tier 3: a real kubelet. The upstream kubelet (`k8s.io/kubernetes`
//! v1.37.2) and containerd (v2.2.9, its CRI plugin with CDI on) built from
//! their Go modules by `run.sh` (`target/cluster/kubelet`, `containerd`,
//! `containerd-shim-runc-v2`, `ctr`), Debian's runc, and images built here
//! as OCI archives (`images/build.sh`: a static pause and a workload that
//! prints the device nodes and environment it was given) since no registry
//! can be reached. The host registers with the kubelet's real device
//! manager and DRA manager through the plugin watcher; what a user would
//! notice is checked: the Node's allocatable, which pods start, and what a
//! container finds in its own `/dev` and environment (its log).
//!
//! Needs root (containerd and the kubelet make mounts and cgroups) and
//! runc (`WDP_RUNC`, else the first `runc` on `PATH` or in `/usr/sbin`).
//! The programs are looked for in `WDP_NODE_BIN_DIR` (default: the folder
//! of `WDP_CLUSTER_BIN`), the image archives in `WDP_NODE_IMAGES` (default:
//! `<that folder>/images`).
//!
//! The pods use the host's network (`hostNetwork`): no CNI plugin is
//! installed. containerd is given a network configuration naming none, so
//! it reports its network ready (the node is Ready), and a pod that asked
//! for a network of its own would fail at its sandbox.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node as NodeObject, Pod};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::api_server::{deploy, host_kubeconfig};
use crate::control_plane::{ControlPlane, free_port, terminate};
use crate::node::{HostProcess, Node};

/// The device-plugin resource: the node's loop devices 0 to 3.
const RESOURCE: &str = "wdp.test/loop";
/// The DRA driver: loop devices 4 to 7.
const DRIVER: &str = "loop.wdp.test";
/// How long a kubelet or containerd may take for a step (a first start
/// of the kubelet builds its caches and waits out cadvisor: seconds on a
/// loaded machine).
const SLOW: Duration = Duration::from_secs(120);
const PAUSE_IMAGE: &str = "wdp.test/pause:1";
const WORKLOAD_IMAGE: &str = "wdp.test/workload:1";

/// The programs of tier 3 and the image archives.
struct Programs {
    bin: PathBuf,
    images: PathBuf,
    runc: PathBuf,
}

impl Programs {
    /// Finds every program; panics with what is missing (tier 3 is never
    /// skipped silently: run.sh leaves it out where it cannot run).
    fn find() -> Self {
        let uid = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1);
        assert_eq!(
            uid, 0,
            "tier 3 needs root: containerd and the kubelet mount and make cgroups"
        );
        let bin = std::env::var_os("WDP_NODE_BIN_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("WDP_CLUSTER_BIN")
                    .and_then(|p| Path::new(&p).parent().map(Path::to_owned))
            })
            .expect("WDP_NODE_BIN_DIR (or WDP_CLUSTER_BIN) names the folder of kubelet and containerd: run tests/cluster/run.sh");
        for program in ["kubelet", "containerd", "containerd-shim-runc-v2", "ctr"] {
            assert!(
                bin.join(program).is_file(),
                "{} is missing: tests/cluster/run.sh builds it",
                bin.join(program).display()
            );
        }
        let images =
            std::env::var_os("WDP_NODE_IMAGES").map_or_else(|| bin.join("images"), PathBuf::from);
        for archive in ["pause.oci.tar", "workload.oci.tar"] {
            assert!(
                images.join(archive).is_file(),
                "{} is missing: bash tests/cluster/images/build.sh {}",
                images.join(archive).display(),
                images.display()
            );
        }
        let runc = std::env::var_os("WDP_RUNC")
            .map(PathBuf::from)
            .or_else(|| {
                let path = std::env::var("PATH").unwrap_or_default();
                path.split(':')
                    .chain(["/usr/sbin", "/usr/local/sbin"])
                    .map(|dir| Path::new(dir).join("runc"))
                    .find(|p| p.is_file())
            })
            .expect("runc is not installed (apt-get install runc, or WDP_RUNC)");
        Self { bin, images, runc }
    }
}

/// A daemon whose output is appended to `<dir>/<name>.log` (restarts
/// append); stopped (SIGTERM, then SIGKILL) when dropped.
struct Daemon {
    name: String,
    log: PathBuf,
    child: Child,
}

impl Daemon {
    fn spawn(dir: &Path, name: &str, program: &Path, args: &[String], path: &str) -> Self {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let child = Command::new(program)
            .args(args)
            .env("PATH", path)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self {
            name: name.to_owned(),
            log,
            child,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn tail(&self, lines: usize) -> String {
        let text = self.log();
        let all: Vec<&str> = text.lines().collect();
        let from = all.len().saturating_sub(lines);
        format!(
            "--- {} (last lines) ---\n{}",
            self.name,
            all[from..].join("\n")
        )
    }

    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{} exited ({status})\n{}", self.name, self.tail(60));
        }
    }

    fn stop(&mut self) {
        terminate(&mut self.child, Duration::from_secs(30));
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.stop();
    }
}

/// containerd with its CRI plugin, in a folder of its own: its own socket,
/// root, state, runc root and CDI folder (the host's `--cdi-dir`).
///
/// `restrict_oom_score_adj`: the kubelet asks for an OOM score below
/// containerd's own for sandboxes (-998) and Guaranteed containers (-997),
/// which needs CAP_SYS_RESOURCE; where the machine's bounding set lacks it
/// (this sandbox's does), runc's `nsexec` fails with "failed to update
/// /proc/self/oom_score_adj: Permission denied". containerd then keeps
/// every score at or above its own, as in rootless setups.
struct Containerd {
    dir: PathBuf,
    socket: PathBuf,
    daemon: Daemon,
}

impl Containerd {
    fn start(programs: &Programs, dir: &Path, cdi: &Path) -> Self {
        std::fs::create_dir_all(dir.join("cni/conf")).unwrap();
        std::fs::create_dir_all(dir.join("cni/bin")).unwrap();
        // A network naming a plugin that is not installed: containerd's
        // network is "ready" (a configuration loaded), the node is Ready,
        // and only host-network pods run.
        std::fs::write(
            dir.join("cni/conf/10-host-network-only.conflist"),
            r#"{"cniVersion": "1.0.0", "name": "host-network-only", "plugins": [{"type": "wdp-no-pod-network"}]}"#,
        )
        .unwrap();
        let socket = dir.join("containerd.sock");
        let d = dir.display();
        let config = format!(
            r#"version = 3
root = "{d}/root"
state = "{d}/state"
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["{cdi}"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        Root = "{d}/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{d}/cni/bin"]
    conf_dir = "{d}/cni/conf"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
            socket = socket.display(),
            cdi = cdi.display(),
            runc = programs.runc.display(),
        );
        std::fs::write(dir.join("containerd.toml"), config).unwrap();
        // The daemon starts the shim by name, from PATH.
        let path = format!(
            "{}:{}",
            programs.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let daemon = Daemon::spawn(
            dir,
            "containerd",
            &programs.bin.join("containerd"),
            &[
                "--config".into(),
                dir.join("containerd.toml").display().to_string(),
            ],
            &path,
        );
        let mut containerd = Self {
            dir: dir.to_owned(),
            socket,
            daemon,
        };
        let started = Instant::now();
        loop {
            containerd.daemon.assert_running();
            if containerd.socket.exists() && containerd.try_ctr(programs, &["version"]).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < SLOW,
                "containerd never answered\n{}",
                containerd.daemon.tail(60)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        for archive in ["pause.oci.tar", "workload.oci.tar"] {
            let archive = programs.images.join(archive);
            containerd.ctr(
                programs,
                &[
                    "-n",
                    "k8s.io",
                    "images",
                    "import",
                    archive.to_str().unwrap(),
                ],
            );
        }
        containerd
    }

    fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    fn try_ctr(&self, programs: &Programs, args: &[&str]) -> Result<String, String> {
        let output = Command::new(programs.bin.join("ctr"))
            .arg("--address")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if output.status.success() {
            Ok(text)
        } else {
            Err(format!("ctr {args:?}: {text}"))
        }
    }

    fn ctr(&self, programs: &Programs, args: &[&str]) -> String {
        self.try_ctr(programs, args)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.daemon.tail(40)))
    }

    /// Kills and deletes every task (the shims exit with them), then stops
    /// containerd.
    fn stop(&mut self, programs: &Programs) {
        if let Ok(tasks) = self.try_ctr(programs, &["-n", "k8s.io", "tasks", "ls", "-q"]) {
            for id in tasks.lines().filter(|l| !l.trim().is_empty()) {
                let _ = self.try_ctr(
                    programs,
                    &["-n", "k8s.io", "tasks", "kill", "-a", "-s", "SIGKILL", id],
                );
                let deadline = Instant::now() + Duration::from_secs(10);
                while self
                    .try_ctr(programs, &["-n", "k8s.io", "tasks", "delete", id])
                    .is_err()
                    && Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        self.daemon.stop();
        // A pod sandbox's shim outlives its tasks until the sandbox is shut
        // down, which only the kubelet asks for: end every shim of this
        // containerd (its `-address` names this socket), by its pid.
        let socket = self.socket.display().to_string();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let ours = args
                .windows(2)
                .any(|pair| pair[0] == b"-address" && pair[1] == socket.as_bytes());
            if ours {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}

/// The kubelet, its root folder (`--root-dir`), configuration and the
/// cgroup its pods live under (`cgroupRoot`, one per kubelet so that
/// kubelets of tests running side by side do not meet).
struct Kubelet {
    dir: PathBuf,
    root: PathBuf,
    cgroup: String,
    args: Vec<String>,
    daemon: Option<Daemon>,
    program: PathBuf,
}

impl Kubelet {
    fn start(
        programs: &Programs,
        plane: &ControlPlane,
        node: &str,
        dir: &Path,
        containerd: &Containerd,
    ) -> Self {
        let root = dir.join("root");
        std::fs::create_dir_all(&root).unwrap();
        let cgroup = format!("/wdp-{node}-{}", std::process::id());
        for hierarchy in cgroup_hierarchies() {
            std::fs::create_dir_all(hierarchy.join(cgroup.trim_start_matches('/')))
                .unwrap_or_else(|e| panic!("cgroup {cgroup} in {}: {e}", hierarchy.display()));
        }
        let config = format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: {cgroup}
containerRuntimeEndpoint: {endpoint}
address: 127.0.0.1
port: {port}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {healthz}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
podLogsDir: {logs}
resolvConf: ""
failSwapOn: false
oomScoreAdj: 0
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
fileCheckFrequency: 5s
"#,
            endpoint = containerd.endpoint(),
            port = free_port(),
            healthz = free_port(),
            logs = dir.join("pods-logs").display(),
        );
        std::fs::write(dir.join("kubelet.yaml"), config).unwrap();
        let args = vec![
            format!("--config={}", dir.join("kubelet.yaml").display()),
            format!("--kubeconfig={}", plane.node_kubeconfig(node).display()),
            format!("--root-dir={}", root.display()),
            format!("--cert-dir={}", dir.join("pki").display()),
            format!("--hostname-override={node}"),
            "--v=4".into(),
        ];
        let mut kubelet = Self {
            dir: dir.to_owned(),
            root,
            cgroup,
            args,
            daemon: None,
            program: programs.bin.join("kubelet"),
        };
        kubelet.run();
        kubelet
    }

    fn run(&mut self) {
        assert!(self.daemon.is_none());
        self.daemon = Some(Daemon::spawn(
            &self.dir,
            "kubelet",
            &self.program,
            &self.args,
            &std::env::var("PATH").unwrap_or_default(),
        ));
    }

    fn stop(&mut self) {
        drop(self.daemon.take());
    }

    fn tail(&self) -> String {
        self.daemon
            .as_ref()
            .map_or_else(String::new, |d| d.tail(80))
    }

    fn assert_running(&mut self) {
        if let Some(daemon) = &mut self.daemon {
            daemon.assert_running();
        }
    }

    /// The lines container `container` of pod `namespace/name` wrote, all
    /// its runs (`<podLogsDir>/<ns>_<pod>_<uid>/<container>/<n>.log`, the
    /// CRI log format: time, stream, tag, line).
    fn container_output(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
    ) -> Vec<String> {
        let folder = self
            .dir
            .join("pods-logs")
            .join(format!("{namespace}_{pod}_{uid}"))
            .join(container);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map(|entries| entries.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .flat_map(|file| {
                std::fs::read_to_string(file)
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|line| line.splitn(4, ' ').nth(3).map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// Every cgroup hierarchy mounted under /sys/fs/cgroup (v2: the one
/// mount; v1: each controller's, and the named and unified ones).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let base = Path::new("/sys/fs/cgroup");
    if base.join("cgroup.controllers").exists() {
        return vec![base.to_owned()];
    }
    std::fs::read_dir(base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.is_symlink() && p.join("cgroup.procs").exists())
        .collect()
}

/// Removes a cgroup and every cgroup below it, deepest first.
fn remove_cgroup(path: &Path) {
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(path);
}

/// Unmounts whatever is still mounted under `dir` (deepest first, lazily):
/// a sandbox's shm, a container's root file system.
fn unmount_under(dir: &Path) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .filter(|point| Path::new(point).starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for point in points {
        let _ = Command::new("umount").args(["-l", point]).status();
    }
}

/// One node of tier 3: the host's folders (`Node`, the kubelet's own
/// folders reached through links), containerd, the kubelet and the host.
struct RealNode {
    programs: Programs,
    node: Node,
    containerd: Option<Containerd>,
    kubelet: Kubelet,
    host: Option<HostProcess>,
    host_kubeconfig: Option<PathBuf>,
}

impl RealNode {
    /// Starts containerd and the kubelet for a node named `name` whose
    /// host root has `/dev/loop0` to `/dev/loop7` (plain files: the host
    /// discovers them there; the kubelet and containerd are given the
    /// machine's own `/dev/loopN`, real block devices) and waits until the
    /// Node is Ready.
    async fn start(plane: &ControlPlane, name: &str, config: &[(&str, &str)]) -> Self {
        let programs = Programs::find();
        let node = Node::new(name);
        for n in 0..8 {
            node.add_device_node(&format!("/dev/loop{n}"));
        }
        node.write_config(
            "host.toml",
            "version = 1\npoll-interval-ms = 200\nreload-debounce-ms = 20\n",
        );
        for (file, text) in config {
            node.write_config(file, text);
        }
        let tmp = node.tmp.path().to_owned();
        let containerd = Containerd::start(&programs, &tmp.join("containerd"), &node.cdi());
        // The kubelet's folders are its own (its plugin watcher does not
        // descend into a linked folder); the host's flags name links to
        // them.
        let kubelet_dir = tmp.join("kubelet");
        let root = kubelet_dir.join("root");
        for (link, target) in [
            ("plugins", "device-plugins"),
            ("plugins_registry", "plugins_registry"),
            ("kubelet-plugins", "plugins"),
        ] {
            std::fs::create_dir_all(root.join(target)).unwrap();
            std::fs::remove_dir(tmp.join(link)).unwrap();
            std::os::unix::fs::symlink(root.join(target), tmp.join(link)).unwrap();
        }
        let kubelet = Kubelet::start(&programs, plane, name, &kubelet_dir, &containerd);
        let mut real = Self {
            programs,
            node,
            containerd: Some(containerd),
            kubelet,
            host: None,
            host_kubeconfig: None,
        };
        real.wait_ready(plane).await;
        real
    }

    /// Waits until the Node's Ready condition is True (registered, the
    /// runtime and its network ready).
    async fn wait_ready(&mut self, plane: &ControlPlane) {
        let nodes: Api<NodeObject> = Api::all(plane.admin.clone());
        let started = Instant::now();
        loop {
            self.kubelet.assert_running();
            let node = nodes.get_opt(&self.node.name).await.unwrap();
            let ready = node
                .as_ref()
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return;
            }
            assert!(
                started.elapsed() < SLOW,
                "node {} never Ready: {:#?}\n{}\n{}",
                self.node.name,
                node.and_then(|n| n.status).and_then(|s| s.conditions),
                self.kubelet.tail(),
                self.containerd.as_ref().unwrap().daemon.tail(30)
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Starts the host on this node's folders (the overlay's RBAC, its
    /// ServiceAccount's token).
    async fn start_host(&mut self, plane: &ControlPlane) {
        // One token for every start (its pod is made once).
        let kubeconfig = match &self.host_kubeconfig {
            Some(path) => path.clone(),
            None => host_kubeconfig(plane, "wasm-device-plugin", &self.node.name).await,
        };
        self.host_kubeconfig = Some(kubeconfig.clone());
        let socket = self.kubelet.root.join("pod-resources/kubelet.sock");
        self.host = Some(self.node.spawn_host(
            &kubeconfig,
            &["--pod-resources-socket", socket.to_str().unwrap()],
        ));
    }

    /// How often the host logged a registration with the kubelet (through
    /// the plugin watcher or kubelet.sock).
    fn registrations(&self) -> usize {
        self.host
            .as_ref()
            .map(HostProcess::log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("registered with the kubelet"))
            .count()
    }

    /// Whether a container of pod `name` (its sandbox or workload) runs,
    /// as containerd tells.
    fn pod_running(&self, name: &str) -> bool {
        let containerd = self.containerd.as_ref().unwrap();
        let label = format!("labels.\"io.kubernetes.pod.name\"=={name}");
        let ids = containerd.ctr(
            &self.programs,
            &["-n", "k8s.io", "containers", "ls", "-q", &label],
        );
        let tasks = containerd.ctr(&self.programs, &["-n", "k8s.io", "tasks", "ls"]);
        tasks.lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() >= 3
                && fields[2] == "RUNNING"
                && ids.lines().any(|id| id.trim() == fields[0])
        })
    }

    /// Waits until the host logged `count` registrations.
    async fn wait_registrations(&mut self, count: usize) {
        let started = Instant::now();
        while self.registrations() < count {
            self.kubelet.assert_running();
            assert!(
                started.elapsed() < SLOW,
                "the host registered {} times, not {count}\n{}",
                self.registrations(),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn host(&self) -> &HostProcess {
        self.host.as_ref().expect("the host runs")
    }

    /// Every log worth reading when a step fails.
    fn logs(&self) -> String {
        format!(
            "--- host ---\n{}\n{}\n{}",
            self.host.as_ref().map(HostProcess::log).unwrap_or_default(),
            self.kubelet.tail(),
            self.containerd
                .as_ref()
                .map(|c| c.daemon.tail(30))
                .unwrap_or_default()
        )
    }

    /// The Node's allocatable count of `resource` ("0" when absent).
    async fn allocatable(&self, plane: &ControlPlane, resource: &str) -> String {
        let node = Api::<NodeObject>::all(plane.admin.clone())
            .get(&self.node.name)
            .await
            .unwrap();
        node.status
            .and_then(|s| s.allocatable)
            .and_then(|a| a.get(resource).map(|q| q.0.clone()))
            .unwrap_or_else(|| "0".into())
    }

    /// Waits until the Node's allocatable count of `resource` is `want`.
    async fn wait_allocatable(&mut self, plane: &ControlPlane, resource: &str, want: &str) {
        let started = Instant::now();
        loop {
            self.kubelet.assert_running();
            let now = self.allocatable(plane, resource).await;
            if now == want {
                return;
            }
            assert!(
                started.elapsed() < SLOW,
                "the Node's allocatable {resource} stayed {now}, not {want}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until pod `name` runs and its container wrote `ready`;
    /// returns what the container wrote and the pod.
    async fn wait_output(&mut self, plane: &ControlPlane, name: &str) -> (Vec<String>, Pod) {
        let pods: Api<Pod> = Api::namespaced(plane.admin.clone(), "default");
        let started = Instant::now();
        loop {
            self.kubelet.assert_running();
            let pod = pods.get(name).await.unwrap();
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            let output = self.kubelet.container_output("default", name, &uid, "work");
            if output.iter().any(|l| l == "ready") {
                return (output, pod);
            }
            assert!(
                started.elapsed() < SLOW,
                "pod {name} never ran its workload: {:#?}\n{}\n{}",
                pod.status,
                plane.kubectl(&["get", "events", "-A"]),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Waits until pod `name`'s phase is `phase`, or a container of it is
    /// waiting with `reason`; returns the pod.
    async fn wait_pod(
        &mut self,
        plane: &ControlPlane,
        name: &str,
        what: impl Fn(&Pod) -> bool,
    ) -> Pod {
        let pods: Api<Pod> = Api::namespaced(plane.admin.clone(), "default");
        let started = Instant::now();
        loop {
            self.kubelet.assert_running();
            let pod = pods.get(name).await.unwrap();
            if what(&pod) {
                return pod;
            }
            assert!(
                started.elapsed() < SLOW,
                "pod {name} never reached the state waited for: {:#?}\n{}\n{}",
                pod.status,
                plane.kubectl(&["get", "events", "-A"]),
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        // The kubelet first (it would start what is stopped next), then
        // every container, containerd, and what they left mounted.
        self.kubelet.stop();
        drop(self.host.take());
        if let Some(mut containerd) = self.containerd.take() {
            containerd.stop(&self.programs);
            unmount_under(&containerd.dir);
        }
        unmount_under(&self.kubelet.root);
        // The kubelet links every container's log into /var/log/containers
        // (a fixed path); the links into this kubelet's logs go with it.
        let logs = self.kubelet.dir.join("pods-logs");
        for entry in std::fs::read_dir("/var/log/containers")
            .into_iter()
            .flatten()
            .flatten()
        {
            if std::fs::read_link(entry.path()).is_ok_and(|target| target.starts_with(&logs)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        for hierarchy in cgroup_hierarchies() {
            remove_cgroup(&hierarchy.join(self.kubelet.cgroup.trim_start_matches('/')));
        }
    }
}

/// What the workload printed: its device nodes (path → "block 7:2") and
/// environment.
struct Seen {
    devices: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
}

fn seen(output: &[String]) -> Seen {
    let mut devices = BTreeMap::new();
    let mut env = BTreeMap::new();
    for line in output {
        if let Some(rest) = line.strip_prefix("device ") {
            let (path, kind) = rest.split_once(' ').unwrap();
            devices.insert(path.to_owned(), kind.to_owned());
        } else if let Some((key, value)) = line.strip_prefix("env ").and_then(|r| r.split_once('='))
        {
            env.insert(key.to_owned(), value.to_owned());
        }
    }
    Seen { devices, env }
}

/// The loop devices a container has: their names (`loop2`).
fn loops(seen: &Seen) -> Vec<String> {
    seen.devices
        .keys()
        .filter_map(|p| p.strip_prefix("/dev/"))
        .filter(|p| p.starts_with("loop") && p[4..].chars().all(|c| c.is_ascii_digit()))
        .map(str::to_owned)
        .collect()
}

/// A host-network pod on `node` running the workload, with `limits` and
/// the claims `claims` (pod claim name → ResourceClaim name).
fn workload_pod(name: &str, node: &str, limits: Value, claims: &[(&str, &str)]) -> Pod {
    let resource_claims: Vec<Value> = claims
        .iter()
        .map(|(claim, object)| json!({"name": claim, "resourceClaimName": object}))
        .collect();
    let uses: Vec<Value> = claims
        .iter()
        .map(|(claim, _)| json!({"name": claim}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "hostNetwork": true,
            // The API server's admission taints a new Node not-ready; no
            // node lifecycle controller runs here to lift it.
            "tolerations": [{"operator": "Exists"}],
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 2,
            "restartPolicy": "Never",
            "resourceClaims": resource_claims,
            "containers": [{
                "name": "work",
                "image": WORKLOAD_IMAGE,
                "imagePullPolicy": "Never",
                "resources": {"limits": limits, "claims": uses},
            }],
        },
    }))
    .unwrap()
}

async fn create_pod(plane: &ControlPlane, pod: &Pod) {
    Api::<Pod>::namespaced(plane.admin.clone(), "default")
        .create(&PostParams::default(), pod)
        .await
        .unwrap();
}

fn loop_config() -> String {
    let guest = crate::node::repo().join("config/guests/allocate-shaper.wasm");
    let guest = guest.canonicalize().unwrap_or(guest);
    format!(
        "version = 1\nresource = \"{RESOURCE}\"\n[[nodes]]\npath = \"/dev/loop[0-3]\"\n\n[hooks.allocate]\nguest = \"{}\"\n\n[guest-config]\nenv-prefix = \"LOOP\"\n",
        guest.display()
    )
}

fn loop_dra_config() -> String {
    let guest = crate::node::repo().join("config/guests/allocate-shaper.wasm");
    let guest = guest.canonicalize().unwrap_or(guest);
    format!(
        "version = 1\nresource = \"wdp.test/loop-dra\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n[[nodes]]\npath = \"/dev/loop[4-7]\"\n\n[hooks.allocate]\nguest = \"{}\"\n\n[guest-config]\nenv-prefix = \"LOOP\"\n",
        guest.display()
    )
}

/// Device plugin: the real kubelet's device manager lists the host's
/// devices (the Node's allocatable), calls Allocate for a pod, and the
/// container starts with the device node and environment Allocate
/// granted; then the node e2e scenarios: the kubelet restarted with the
/// pod running, a pod deleted while the kubelet is down, the host
/// restarted.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn a_real_kubelet_starts_pods_with_the_devices_allocate_granted() {
    let plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    plane.admin_service_account("default", "default").await;
    let mut real = RealNode::start(&plane, "kubelet-dp", &[("loop.toml", &loop_config())]).await;
    real.start_host(&plane).await;
    real.wait_allocatable(&plane, RESOURCE, "4").await;
    real.wait_registrations(1).await;

    // One device: the container has exactly that device node, and the
    // environment the allocate guest added names it.
    create_pod(
        &plane,
        &workload_pod("one", "kubelet-dp", json!({RESOURCE: "1"}), &[]),
    )
    .await;
    let (output, _) = real.wait_output(&plane, "one").await;
    let first = seen(&output);
    let held = loops(&first);
    assert_eq!(held.len(), 1, "{output:#?}");
    assert_eq!(
        first.env.get("LOOP_VISIBLE_DEVICES"),
        Some(&held[0]),
        "{output:#?}"
    );
    let number = &held[0][4..];
    assert_eq!(
        first.devices[&format!("/dev/{}", held[0])],
        format!("block 7:{number}")
    );

    // The kubelet restarted with the pod running: the host registers
    // again, the pod keeps its container, and the device it holds is still
    // counted (a pod asking for every device waits; three more fit).
    real.kubelet.stop();
    real.kubelet.run();
    real.wait_ready(&plane).await;
    real.wait_registrations(2).await;
    real.wait_allocatable(&plane, RESOURCE, "4").await;
    let pod = real.wait_pod(&plane, "one", running_unrestarted).await;
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
    create_pod(
        &plane,
        &workload_pod("three", "kubelet-dp", json!({RESOURCE: "3"}), &[]),
    )
    .await;
    let (output, _) = real.wait_output(&plane, "three").await;
    let three = loops(&seen(&output));
    assert_eq!(three.len(), 3, "{output:#?}");
    assert!(
        !three.contains(&held[0]),
        "{three:?} holds {} of pod one",
        held[0]
    );

    // A pod deleted while the kubelet is down: once back, the kubelet stops
    // its container and its device is free again (a pod asking for it
    // starts).
    real.kubelet.stop();
    assert!(real.pod_running("one"));
    Api::<Pod>::namespaced(plane.admin.clone(), "default")
        .delete("one", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    real.kubelet.run();
    real.wait_ready(&plane).await;
    // Until the host registered again the kubelet has no healthy device,
    // and until it stopped the deleted pod's container that device is
    // still taken (a pod admitted before either is rejected: "Allocate
    // failed due to requested number of devices unavailable").
    real.wait_registrations(3).await;
    real.wait_allocatable(&plane, RESOURCE, "4").await;
    let started = Instant::now();
    while real.pod_running("one") {
        assert!(
            started.elapsed() < SLOW,
            "the kubelet never stopped the deleted pod's container\n{}",
            real.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    create_pod(
        &plane,
        &workload_pod("again", "kubelet-dp", json!({RESOURCE: "1"}), &[]),
    )
    .await;
    let (output, _) = real.wait_output(&plane, "again").await;
    assert_eq!(loops(&seen(&output)), held, "{output:#?}");

    // The host restarted: the kubelet counts no device while it is away,
    // and all of them once it registered again; running pods keep theirs.
    real.host.as_mut().unwrap().terminate().await;
    real.wait_allocatable(&plane, RESOURCE, "0").await;
    real.start_host(&plane).await;
    real.wait_allocatable(&plane, RESOURCE, "4").await;
    for name in ["three", "again"] {
        let pod = Api::<Pod>::namespaced(plane.admin.clone(), "default")
            .get(name)
            .await
            .unwrap();
        assert_eq!(
            pod.status.unwrap().phase.as_deref(),
            Some("Running"),
            "{name}"
        );
    }
    assert!(real.host().problems().is_empty(), "{}", real.host().log());
}

/// Whether every container of the pod runs and none restarted.
fn running_unrestarted(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|c| {
            c.iter().all(|c| {
                c.restart_count == 0 && c.state.as_ref().is_some_and(|s| s.running.is_some())
            })
        })
}

/// Waits for pod `pod`'s workload; checks that the container has exactly
/// the loop device the real scheduler allocated for ResourceClaim `claim`
/// (from the CDI spec the host wrote) and the environment the allocate
/// guest added; returns the device.
async fn claimed_device(
    real: &mut RealNode,
    plane: &ControlPlane,
    pod: &str,
    claim: &str,
) -> String {
    let (output, _) = real.wait_output(plane, pod).await;
    let claim: Value = serde_json::from_str(&plane.kubectl(&[
        "get",
        "-o",
        "json",
        "resourceclaim",
        "-n",
        "default",
        claim,
    ]))
    .unwrap();
    let result = &claim["status"]["allocation"]["devices"]["results"][0];
    assert_eq!(result["driver"], DRIVER, "{claim:#}");
    assert_eq!(result["pool"], real.node.name.as_str(), "{claim:#}");
    let device = result["device"].as_str().unwrap().to_owned();
    let seen = seen(&output);
    assert_eq!(loops(&seen), std::slice::from_ref(&device), "{output:#?}");
    assert_eq!(
        seen.env.get("LOOP_VISIBLE_DEVICES"),
        Some(&device),
        "{output:#?}"
    );
    device
}

/// DRA: the real kubelet's DRA manager registers the host's driver through
/// the plugin watcher; the real scheduler allocates a claim on the host's
/// slice; the kubelet calls NodePrepareResources and the container starts
/// with the device of the CDI spec the host wrote. The kubelet restarted
/// with the pod running (registered again, the container kept), the host
/// restarted (registered again, a second claim prepared by the new
/// process), and deleting the pods unprepares both claims (their specs are
/// removed).
#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs the upstream control plane: bash tests/cluster/run.sh"]
async fn a_real_kubelet_starts_pods_with_the_cdi_devices_of_their_claims() {
    let mut plane = ControlPlane::start().await;
    deploy(&plane, "kustomize-overlays-dra.pypi-1.37.yaml").await;
    plane.admin_service_account("default", "default").await;
    plane.start_scheduler();
    let mut real = RealNode::start(
        &plane,
        "kubelet-dra",
        &[("loop-dra.toml", &loop_dra_config())],
    )
    .await;
    real.start_host(&plane).await;
    let scratch = real.node.tmp.path().to_owned();
    let objects = json!({"apiVersion": "v1", "kind": "List", "items": [
        {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == '{DRIVER}'")}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "loop", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "loop", "exactly": {"deviceClassName": DRIVER}}]}},
        },
    ]});
    std::fs::write(scratch.join("claim.json"), objects.to_string()).unwrap();
    plane.kubectl(&["apply", "-f", scratch.join("claim.json").to_str().unwrap()]);
    let mut pod = workload_pod("claimed", "kubelet-dra", json!({}), &[("loop", "loop")]);
    // The claim's device metadata (KEP-5304), where a consumer reads it:
    // the workload says "mount <path>" for each argument that exists.
    let metadata = format!(
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/loop/loop/{DRIVER}-metadata.json"
    );
    pod.spec.as_mut().unwrap().containers[0].args = Some(vec![metadata.clone()]);
    // The scheduler allocates the claim and binds the pod.
    pod.spec.as_mut().unwrap().node_name = None;
    pod.spec.as_mut().unwrap().node_selector = Some(
        [(
            "kubernetes.io/hostname".to_owned(),
            "kubelet-dra".to_owned(),
        )]
        .into(),
    );
    create_pod(&plane, &pod).await;
    let first = claimed_device(&mut real, &plane, "claimed", "loop").await;
    let (output, _) = real.wait_output(&plane, "claimed").await;
    assert!(
        output
            .iter()
            .any(|line| *line == format!("mount {metadata}")),
        "the device metadata file is not in the container: {output:#?}"
    );
    let cdi = real.node.cdi();
    let specs = move || -> Vec<PathBuf> {
        std::fs::read_dir(&cdi)
            .map(|e| e.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default()
    };
    assert_eq!(specs().len(), 1, "one CDI spec per prepared claim");

    // The kubelet restarted with the pod running: its plugin watcher
    // registers the driver again and the pod keeps its container.
    let before = real.registrations();
    real.kubelet.stop();
    real.kubelet.run();
    real.wait_ready(&plane).await;
    real.wait_registrations(before + 1).await;
    real.wait_pod(&plane, "claimed", running_unrestarted).await;

    // The host restarted: it registers again, and the new process
    // prepares a second claim on another device.
    real.host.as_mut().unwrap().terminate().await;
    real.start_host(&plane).await;
    real.wait_registrations(1).await;
    let second = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "loop-2", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "loop", "exactly": {"deviceClassName": DRIVER}}]}},
    });
    std::fs::write(scratch.join("claim-2.json"), second.to_string()).unwrap();
    plane.kubectl(&[
        "apply",
        "-f",
        scratch.join("claim-2.json").to_str().unwrap(),
    ]);
    let mut pod = workload_pod("claimed-2", "kubelet-dra", json!({}), &[("loop", "loop-2")]);
    pod.spec.as_mut().unwrap().node_name = None;
    pod.spec.as_mut().unwrap().node_selector = Some(
        [(
            "kubernetes.io/hostname".to_owned(),
            "kubelet-dra".to_owned(),
        )]
        .into(),
    );
    create_pod(&plane, &pod).await;
    let other = claimed_device(&mut real, &plane, "claimed-2", "loop-2").await;
    assert_ne!(first, other);
    assert_eq!(specs().len(), 2, "{:?}", specs());

    // The pods deleted: the kubelet unprepares their claims (the first
    // through the checkpoint the earlier process left) and the host
    // removes each claim's CDI spec.
    for name in ["claimed", "claimed-2"] {
        Api::<Pod>::namespaced(plane.admin.clone(), "default")
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let started = Instant::now();
    while !specs().is_empty() {
        assert!(
            started.elapsed() < SLOW,
            "CDI specs left: {:?}\n{}",
            specs(),
            real.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(real.host().problems().is_empty(), "{}", real.host().log());
}
