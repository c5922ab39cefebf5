//! The upstream control plane, as processes of `wdp-cluster` (the Go
//! binary `tests/cluster/run.sh` builds from the Kubernetes and etcd
//! modules): etcd and kube-apiserver on loopback with RBAC, the Node
//! authorizer, service-account tokens and an audit log; kube-scheduler and
//! kube-controller-manager on demand.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::PostParams;
use kube::{Api, Client};
use serde_json::Value;
use tempfile::TempDir;

/// How long a component may take to answer after it starts (the API
/// server's first start builds its caches: seconds on a loaded machine).
pub const STARTUP: Duration = Duration::from_secs(120);

/// The static token the tests' own administrator authenticates with
/// (group `system:masters`); the host never uses it.
const ADMIN_TOKEN: &str = "wdp-cluster-admin-token";

/// The nodes a real kubelet runs as (tier 3): each has a token of its own.
pub const KUBELET_NODES: [&str; 2] = ["kubelet-dp", "kubelet-dra"];

/// The static token of node `node`'s kubelet.
fn node_token(node: &str) -> String {
    format!("wdp-cluster-node-{node}")
}

/// The `wdp-cluster` binary: `WDP_CLUSTER_BIN`, set by `run.sh`.
fn program() -> PathBuf {
    PathBuf::from(std::env::var("WDP_CLUSTER_BIN").expect(
        "WDP_CLUSTER_BIN names the wdp-cluster binary: run these tests with tests/cluster/run.sh",
    ))
}

/// A loopback port free at the time of asking.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A component process whose output goes to `<dir>/<name>.log`; stopped
/// (SIGTERM, then SIGKILL) when dropped.
pub struct Component {
    name: String,
    log: PathBuf,
    child: Child,
}

impl Component {
    fn spawn(dir: &Path, name: &str, args: &[String]) -> Self {
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(program())
            .args(args)
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

    /// The last lines the component wrote.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(40);
        format!(
            "--- {} (last lines) ---\n{}",
            self.name,
            lines[from..].join("\n")
        )
    }

    /// Panics (with the log) if the process has ended.
    fn assert_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!("{} exited ({status})\n{}", self.name, self.log_tail());
        }
    }

    fn stop(&mut self) {
        // SIGTERM first: etcd and the API server close their stores.
        terminate(&mut self.child, Duration::from_secs(20));
    }
}

/// Stops `child`: SIGTERM, up to `grace` for it to exit (polled: a child's
/// exit has no awaitable event in std), then SIGKILL; reaps it.
pub fn terminate(child: &mut Child, grace: Duration) {
    if child.try_wait().unwrap().is_none() {
        let _ = Command::new("kill").arg(child.id().to_string()).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Drop for Component {
    fn drop(&mut self) {
        self.stop();
    }
}

/// etcd and kube-apiserver, and the scheduler and controller manager once
/// asked for. Dropping it stops every process.
pub struct ControlPlane {
    /// Certificates, keys, tokens, kubeconfigs, logs and etcd's data.
    pub dir: TempDir,
    /// The API server's secure port on 127.0.0.1.
    pub port: u16,
    etcd_port: u16,
    etcd: Option<Component>,
    apiserver: Option<Component>,
    others: Vec<Component>,
    /// A client with the administrator's token.
    pub admin: Client,
}

impl ControlPlane {
    /// Starts etcd and the API server and waits until the server is ready.
    pub async fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("wdp-cluster-")
            .tempdir()
            .unwrap();
        let path = dir.path();
        let status = Command::new(program())
            .arg("service-account-key")
            .arg(path.join("service-account.key"))
            .status()
            .unwrap();
        assert!(status.success(), "writing the service-account key");
        // The administrator, and one node identity per real kubelet the
        // tests run (`system:node:<name>` in `system:nodes`: the Node
        // authorizer and NodeRestriction judge it as they judge a node).
        let mut tokens = format!("{ADMIN_TOKEN},wdp-admin,wdp-admin,\"system:masters\"\n");
        for node in KUBELET_NODES {
            tokens.push_str(&format!(
                "{},system:node:{node},system:node:{node},\"system:nodes\"\n",
                node_token(node)
            ));
        }
        std::fs::write(path.join("tokens.csv"), tokens).unwrap();
        // Every request, with who made it and its answer's code.
        std::fs::write(
            path.join("audit-policy.yaml"),
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
        )
        .unwrap();
        let etcd_port = free_port();
        let etcd = Component::spawn(
            path,
            "etcd",
            &[
                "etcd".into(),
                format!("--data-dir={}", path.join("etcd").display()),
                format!("--listen-client-url=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-url=http://127.0.0.1:{}", free_port()),
            ],
        );
        let port = free_port();
        let apiserver = Component::spawn(
            path,
            "kube-apiserver",
            &apiserver_args(path, port, etcd_port),
        );
        write_kubeconfig(
            &path.join("admin.kubeconfig"),
            port,
            &path.join("pki/apiserver.crt"),
            ADMIN_TOKEN,
        );
        let mut etcd = Some(etcd);
        let mut apiserver = Some(apiserver);
        let admin = wait_ready(path, port, [&mut etcd, &mut apiserver]).await;
        Self {
            admin,
            dir,
            port,
            etcd_port,
            etcd,
            apiserver,
            others: Vec::new(),
        }
    }

    /// The administrator's kubeconfig (for kubectl).
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// Stops the API server (SIGTERM) and starts it again on the same port,
    /// etcd and certificates; waits until it is ready.
    pub async fn restart_apiserver(&mut self) {
        self.stop_apiserver();
        self.start_apiserver().await;
    }

    /// Stops the API server; clients see connections refused until
    /// [`start_apiserver`](Self::start_apiserver).
    pub fn stop_apiserver(&mut self) {
        drop(self.apiserver.take());
    }

    /// Starts the API server again (after [`stop_apiserver`](Self::stop_apiserver)).
    pub async fn start_apiserver(&mut self) {
        let path = self.dir.path();
        self.apiserver = Some(Component::spawn(
            path,
            "kube-apiserver",
            &apiserver_args(path, self.port, self.etcd_port),
        ));
        self.admin = wait_ready(
            self.dir.path(),
            self.port,
            [&mut self.etcd, &mut self.apiserver],
        )
        .await;
    }

    /// Starts kube-scheduler with the administrator's kubeconfig.
    pub fn start_scheduler(&mut self) {
        let kubeconfig = self.admin_kubeconfig();
        let component = Component::spawn(
            self.dir.path(),
            "kube-scheduler",
            &[
                "kube-scheduler".into(),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--authentication-kubeconfig={}", kubeconfig.display()),
                format!("--authorization-kubeconfig={}", kubeconfig.display()),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
            ],
        );
        self.others.push(component);
    }

    /// Starts kube-controller-manager running `controllers` only.
    pub fn start_controller_manager(&mut self, controllers: &str) {
        let kubeconfig = self.admin_kubeconfig();
        let component = Component::spawn(
            self.dir.path(),
            "kube-controller-manager",
            &[
                "kube-controller-manager".into(),
                format!("--kubeconfig={}", kubeconfig.display()),
                format!("--authentication-kubeconfig={}", kubeconfig.display()),
                format!("--authorization-kubeconfig={}", kubeconfig.display()),
                "--leader-elect=false".into(),
                "--use-service-account-credentials=false".into(),
                format!("--controllers={controllers}"),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
            ],
        );
        self.others.push(component);
    }

    /// Writes a key of its own to etcd (moving its revision on) and
    /// compacts etcd's history up to the new revision: every resource
    /// version a client saw before is gone (a watch resuming from one is
    /// answered 410 Gone). Through etcd's JSON gateway, with curl.
    pub fn etcd_compact_all(&self) {
        let url = format!("http://127.0.0.1:{}", self.etcd_port);
        let post = |path: &str, body: Value| -> Value {
            let output = Command::new("curl")
                .args(["-fsS", "-X", "POST", "-d", &body.to_string()])
                .arg(format!("{url}{path}"))
                .output()
                .unwrap();
            assert!(
                output.status.success(),
                "etcd {path}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            serde_json::from_slice(&output.stdout).unwrap()
        };
        // base64("wdp-cluster-compaction"), base64("x")
        let put = post(
            "/v3/kv/put",
            serde_json::json!({"key": "d2RwLWNsdXN0ZXItY29tcGFjdGlvbg==", "value": "eA=="}),
        );
        let revision = put["header"]["revision"]
            .as_str()
            .expect("etcd's put answers its revision")
            .to_owned();
        post(
            "/v3/kv/compaction",
            serde_json::json!({"revision": revision, "physical": true}),
        );
    }

    /// Every component's last log lines.
    pub fn logs(&self) -> String {
        [&self.etcd, &self.apiserver]
            .into_iter()
            .flatten()
            .chain(&self.others)
            .map(Component::log_tail)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A kubeconfig for the kubelet of node `node` (one of
    /// [`KUBELET_NODES`]): the node's own identity, `system:node:<node>`.
    pub fn node_kubeconfig(&self, node: &str) -> PathBuf {
        assert!(
            KUBELET_NODES.contains(&node),
            "no token for node {node}: add it to KUBELET_NODES"
        );
        let path = self.dir.path().join(format!("node-{node}.kubeconfig"));
        write_kubeconfig(
            &path,
            self.port,
            &self.dir.path().join("pki/apiserver.crt"),
            &node_token(node),
        );
        path
    }

    /// Runs kubectl (`WDP_KUBECTL`, the deploy tools' kubectl 1.37) as the
    /// administrator; panics with its output when it fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let output = self.run_kubectl(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "kubectl {args:?}: {text}");
        text
    }

    /// Runs kubectl as [`kubectl`](Self::kubectl) does, whatever its exit
    /// status; returns its standard output.
    pub fn kubectl_status(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.run_kubectl(args).stdout).into_owned()
    }

    fn run_kubectl(&self, args: &[&str]) -> std::process::Output {
        let kubectl = std::env::var("WDP_KUBECTL")
            .expect("WDP_KUBECTL names kubectl: run these tests with tests/cluster/run.sh");
        Command::new(kubectl)
            .arg(format!(
                "--kubeconfig={}",
                self.admin_kubeconfig().display()
            ))
            .args(args)
            .output()
            .unwrap()
    }

    /// A kubeconfig authenticating as ServiceAccount `namespace/name`
    /// with a token bound to a pod of it on node `node`, as the
    /// DaemonSet's pod has: the pod object is made here (bound to the node,
    /// never run), then a token requested for it (TokenRequest, one hour).
    /// The server puts the node's name into such a token, which node-scoped
    /// permissions (`associated-node:` verbs) check.
    pub async fn pod_kubeconfig(&self, namespace: &str, name: &str, node: &str) -> PathBuf {
        let pods: Api<Pod> = Api::namespaced(self.admin.clone(), namespace);
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}-{node}"), "namespace": namespace},
            "spec": {
                "nodeName": node,
                "serviceAccountName": name,
                "containers": [{"name": "host", "image": "wasm-device-plugin:cluster-test"}],
            },
        }))
        .unwrap();
        let pod = pods
            .create(&PostParams::default(), &pod)
            .await
            .unwrap_or_else(|e| panic!("the host's pod on {node}: {e}"));
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), namespace);
        let request: TokenRequest = serde_json::from_value(serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1", "kind": "Pod",
                    "name": pod.metadata.name, "uid": pod.metadata.uid,
                },
            },
        }))
        .unwrap();
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("a token for {namespace}/{name}: {e}"));
        let token = issued.status.expect("a token request's status").token;
        let path = self.dir.path().join(format!("{name}-{node}.kubeconfig"));
        write_kubeconfig(
            &path,
            self.port,
            &self.dir.path().join("pki/apiserver.crt"),
            &token,
        );
        path
    }

    /// Creates ServiceAccount `namespace/name` (what the service-account
    /// controller, not run here, would make: pods need their namespace's
    /// `default`).
    pub async fn admin_service_account(&self, namespace: &str, name: &str) {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.admin.clone(), namespace);
        let account: ServiceAccount = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": namespace}
        }))
        .unwrap();
        accounts
            .create(&PostParams::default(), &account)
            .await
            .unwrap_or_else(|e| panic!("ServiceAccount {namespace}/{name}: {e}"));
    }

    /// The audit log's events so far (one JSON object per request).
    pub fn audit_events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("audit.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        // Clients of the API server first, etcd last.
        self.others.clear();
        self.apiserver = None;
        self.etcd = None;
    }
}

/// Waits until the API server's `/readyz` answers `ok`; returns a client
/// for the administrator. The serving certificate is the API server's own
/// (self-signed on its first start, in `<dir>/pki/`). Panics with the logs
/// when a component exits or the server is not ready within [`STARTUP`].
async fn wait_ready(dir: &Path, port: u16, components: [&mut Option<Component>; 2]) -> Client {
    let started = Instant::now();
    let cert = dir.join("pki/apiserver.crt");
    let kubeconfig = dir.join("admin.kubeconfig");
    let [etcd, apiserver] = components;
    loop {
        for component in [&mut *etcd, &mut *apiserver].into_iter().flatten() {
            component.assert_running();
        }
        if cert.exists() {
            write_kubeconfig(&kubeconfig, port, &cert, ADMIN_TOKEN);
            if let Ok(client) = wdp_dra_client::client(Some(&kubeconfig)).await {
                let request = hyper::Request::get("/readyz").body(Vec::new()).unwrap();
                if client.request_text(request).await.is_ok_and(|t| t == "ok") {
                    return client;
                }
            }
        }
        if started.elapsed() > STARTUP {
            let logs: Vec<String> = [&*etcd, &*apiserver]
                .into_iter()
                .flatten()
                .map(Component::log_tail)
                .collect();
            panic!(
                "the API server was not ready within {STARTUP:?}\n{}",
                logs.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// kube-apiserver's flags: loopback only, RBAC and the Node authorizer,
/// service-account tokens signed with the key in `dir`, the static admin
/// token, an audit log, and the 1.37 defaults for every DRA feature gate
/// the host relies on (named here so that a release changing one shows).
fn apiserver_args(dir: &Path, port: u16, etcd_port: u16) -> Vec<String> {
    let key = dir.join("service-account.key");
    vec![
        "kube-apiserver".into(),
        format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
        "--bind-address=127.0.0.1".into(),
        "--advertise-address=127.0.0.1".into(),
        // No Endpoints for the `kubernetes` Service: nothing in-cluster
        // dials it here, and loopback may not be published as one.
        "--endpoint-reconciler-type=none".into(),
        format!("--secure-port={port}"),
        format!("--cert-dir={}", dir.join("pki").display()),
        "--service-cluster-ip-range=10.96.0.0/24".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!("--service-account-key-file={}", key.display()),
        format!("--service-account-signing-key-file={}", key.display()),
        "--authorization-mode=Node,RBAC".into(),
        format!("--token-auth-file={}", dir.join("tokens.csv").display()),
        format!("--audit-policy-file={}", dir.join("audit-policy.yaml").display()),
        format!("--audit-log-path={}", dir.join("audit.log").display()),
        "--audit-log-format=json".into(),
        "--feature-gates=DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRADeviceTaints=true,DRAResourceClaimDeviceStatus=true,DRAExtendedResource=true".into(),
    ]
}

/// A kubeconfig for `https://127.0.0.1:<port>` trusting `ca` (the API
/// server's self-signed bundle), authenticating with `token`.
fn write_kubeconfig(path: &Path, port: u16, ca: &Path, token: &str) {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: wdp-cluster\n  cluster:\n    server: https://127.0.0.1:{port}\n    certificate-authority: {ca}\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: wdp-cluster\n  context:\n    cluster: wdp-cluster\n    user: user\ncurrent-context: wdp-cluster\n",
        ca = ca.display()
    );
    std::fs::write(path, text).unwrap();
}
