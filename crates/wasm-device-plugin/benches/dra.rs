//! The DRA mode on the real binary, beside the shipped configuration's four
//! device-plugin resources: `cargo bench -p wasm-device-plugin --bench dra`.
//!
//! One DRA resource (loop4–loop7 of a fixture root) is served four times:
//! with the built-in policy, then with the `allocate-shaper` guest, with
//! the CDI folder on disk and then on tmpfs (as a node's `/var/run/cdi`
//! is; the checkpoint in the state folder stays on disk), against the
//! in-process API server and DRA kubelet stand-in. Printed:
//!
//! - `NodePrepareResources` round trips (claim read from the API server,
//!   guests, CDI spec written, checkpoint), p50/p99 over
//!   `WDP_BENCH_CLAIMS` claims (default 200), each unprepared after;
//! - hardware change → republished slice: a device node removed until its
//!   device carries the unhealthy taint in the API server, and back;
//! - config change → republished slice: `replicas` 1 ↔ 2 until the slice
//!   holds the new device count;
//! - kubelet restart (which wipes the node's slices) → slices back;
//! - the same claims prepared by 8 concurrent callers (each on devices of
//!   its own, 32 with `replicas = 8`), p50/p99 and throughput beside the
//!   serial throughput (claims prepared and unprepared per second);
//! - the host's RSS with one DRA and four device-plugin resources, and
//!   its CPU use while idle.
//!
//! On a machine with more than two cores, `WDP_BENCH_HOST_CPUS=0,1
//! taskset -c 2-7 cargo bench -p wasm-device-plugin --bench dra` gives the
//! host two cores of its own and keeps the bench client and API server off
//! them; `WDP_BENCH_BINARY` measures another build of the host.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
    ResourceClaimStatus, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use support::{Layout, SHIPPED_RESOURCES, ms, percentile, status_kib};
use wdp_fake_apiserver::FakeApiServer;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet, SimKubelet};

const NODE: &str = "bench-node";
const DRIVER: &str = "loop.bench.example.com";
const WAIT: Duration = Duration::from_secs(30);

fn resource_file(guest: bool, replicas: u32) -> String {
    let hooks = if guest {
        "[hooks.allocate]\nguest = \"guests/allocate-shaper.wasm\"\n\n[guest-config]\nenv-prefix = \"LOOP\"\n"
    } else {
        ""
    };
    format!(
        "version = 1\nresource = \"bench.example.com/loop-dra\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n\n\
         [[nodes]]\npath = \"/dev/loop[4-7]\"\nreplicas = {replicas}\n\n{hooks}"
    )
}

fn devices_in(slices: &[ResourceSlice]) -> Vec<&k8s_openapi::api::resource::v1::Device> {
    slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER && s.spec.node_name.as_deref() == Some(NODE))
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect()
}

fn claim(n: usize, device: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("claim-{n}")),
            namespace: Some("bench".to_owned()),
            ..ObjectMeta::default()
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        request: "loop".to_owned(),
                        driver: DRIVER.to_owned(),
                        pool: NODE.to_owned(),
                        device: device.to_owned(),
                        ..DeviceRequestAllocationResult::default()
                    }]),
                    config: None,
                }),
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        }),
        ..ResourceClaim::default()
    }
}

/// Claim `n` on `device`: created, prepared (its round trip returned),
/// unprepared and deleted.
async fn prepare_one(api: &FakeApiServer, dra: &SimDraKubelet, n: usize, device: &str) -> Duration {
    let c = api.put_claim(claim(n, device));
    let reference = ClaimRef {
        namespace: "bench".to_owned(),
        uid: c.metadata.uid.clone().unwrap(),
        name: c.metadata.name.clone().unwrap(),
    };
    let outcome = dra
        .prepare(DRIVER, std::slice::from_ref(&reference))
        .await
        .unwrap();
    assert!(
        matches!(outcome.claims.get(&reference.uid), Some(Ok(d)) if !d.is_empty()),
        "claim {n} not prepared: {:?}",
        outcome.claims
    );
    dra.unprepare(DRIVER, std::slice::from_ref(&reference))
        .await
        .unwrap();
    api.delete_claim("bench", &format!("claim-{n}"));
    outcome.elapsed
}

/// One host run: prints every figure for this policy.
async fn run(guest: bool, claims: usize, cdi_on_tmpfs: bool) {
    let label = match (guest, cdi_on_tmpfs) {
        (false, false) => "built-in, CDI folder on disk",
        (true, false) => "allocate guest, CDI folder on disk",
        (false, true) => "built-in, CDI folder on tmpfs",
        (true, true) => "allocate guest, CDI folder on tmpfs",
    };
    let layout = if cdi_on_tmpfs {
        Layout::shipped().with_cdi_on_tmpfs()
    } else {
        Layout::shipped()
    };
    let config_file = layout.config.join("loop-dra.toml");
    std::fs::write(&config_file, resource_file(guest, 1)).unwrap();
    let registry = layout.tmp.path().join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let api = Arc::new(FakeApiServer::start().await.unwrap());
    let kubeconfig = layout.tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let wiper = api.clone();
    let mut dra = SimDraKubelet::start(
        &registry,
        DraSimOptions {
            wipe: Some(Arc::new(move || {
                wiper.wipe_node_slices(NODE, None);
            })),
            ..DraSimOptions::default()
        },
    )
    .await
    .unwrap();
    let kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
    let mut child = layout.run_dra(&registry, &kubeconfig, NODE);
    let pid = child.id().unwrap();
    for r in SHIPPED_RESOURCES {
        kubelet.wait_registered(r, 1, WAIT).await.unwrap();
    }
    dra.wait_registered(DRIVER, WAIT).await.unwrap();
    let slices = api
        .wait_for_slices(|s| devices_in(s).len() == 4, WAIT)
        .await
        .unwrap();
    let names: Vec<String> = devices_in(&slices).iter().map(|d| d.name.clone()).collect();
    let idle_kib = status_kib(pid, "VmRSS");
    let idle_cpu = support::idle_cpu_share(pid, Duration::from_secs(2)).await;

    // NodePrepareResources round trips.
    let serial_cpu = support::CpuSplit::start(pid);
    let serial_started = Instant::now();
    let mut prepare = Vec::with_capacity(claims);
    for n in 0..claims {
        prepare.push(prepare_one(&api, &dra, n, &names[n % names.len()]).await);
    }
    let serial_wall = serial_started.elapsed();
    let serial_cpu = serial_cpu.per_claim(claims);
    let loaded_kib = status_kib(pid, "VmRSS");

    // Hardware change → taint published, and back.
    let node = layout.root.join("dev/loop7");
    let (mut unplug, mut replug) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let t = Instant::now();
        std::fs::remove_file(&node).unwrap();
        api.wait_for_slices(
            |s| {
                devices_in(s)
                    .iter()
                    .any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
            },
            WAIT,
        )
        .await
        .unwrap();
        unplug.push(t.elapsed());
        let t = Instant::now();
        std::fs::write(&node, b"").unwrap();
        api.wait_for_slices(
            |s| {
                let d = devices_in(s);
                d.len() == 4
                    && d.iter()
                        .all(|d| d.taints.as_ref().is_none_or(Vec::is_empty))
            },
            WAIT,
        )
        .await
        .unwrap();
        replug.push(t.elapsed());
    }

    // Config change → new device count published.
    let mut edits = Vec::new();
    for i in 0..10 {
        let replicas = if i % 2 == 0 { 2 } else { 1 };
        let t = Instant::now();
        std::fs::write(&config_file, resource_file(guest, replicas)).unwrap();
        api.wait_for_slices(|s| devices_in(s).len() == 4 * replicas as usize, WAIT)
            .await
            .unwrap();
        edits.push(t.elapsed());
    }

    // Kubelet restart (slices wiped) → republished.
    let mut restarts = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        dra.restart().await.unwrap();
        dra.wait_registered(DRIVER, WAIT).await.unwrap();
        api.wait_for_slices(|s| devices_in(s).len() == 4, WAIT)
            .await
            .unwrap();
        restarts.push(t.elapsed());
    }

    // The same number of claims from 8 callers at once, each on 4 devices
    // of its own (so no two callers ever ask for one device).
    const CALLERS: usize = 8;
    std::fs::write(&config_file, resource_file(guest, 8)).unwrap();
    let slices = api
        .wait_for_slices(|s| devices_in(s).len() == 32, WAIT)
        .await
        .unwrap();
    let names: Vec<String> = devices_in(&slices).iter().map(|d| d.name.clone()).collect();
    let per_caller = claims.div_ceil(CALLERS);
    let parallel_cpu = support::CpuSplit::start(pid);
    let parallel_started = Instant::now();
    let lanes = (0..CALLERS).map(|lane| {
        let (api, dra, names) = (&api, &dra, &names);
        async move {
            let mut samples = Vec::with_capacity(per_caller);
            for k in 0..per_caller {
                let n = claims + lane * per_caller + k;
                samples.push(prepare_one(api, dra, n, &names[lane * 4 + k % 4]).await);
            }
            samples
        }
    });
    let mut parallel: Vec<Duration> = futures::future::join_all(lanes)
        .await
        .into_iter()
        .flatten()
        .collect();
    let parallel_wall = parallel_started.elapsed();
    let parallel_cpu = parallel_cpu.per_claim(parallel.len());

    println!("\n{label}:");
    println!(
        "  NodePrepareResources ({claims} claims): p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&mut prepare, 0.5)),
        ms(percentile(&mut prepare, 0.99))
    );
    let serial_rate = claims as f64 / serial_wall.as_secs_f64();
    let parallel_rate = parallel.len() as f64 / parallel_wall.as_secs_f64();
    println!(
        "  NodePrepareResources, {CALLERS} callers ({} claims): p50 {:.2} ms, p99 {:.2} ms; \
         {parallel_rate:.0} claims/s against {serial_rate:.0} claims/s serial (x{:.1})",
        parallel.len(),
        ms(percentile(&mut parallel, 0.5)),
        ms(percentile(&mut parallel, 0.99)),
        parallel_rate / serial_rate
    );
    println!("    serial: {serial_cpu}");
    println!("    {CALLERS} callers: {parallel_cpu}");
    for (what, samples) in [
        ("device node removed → taint published", &mut unplug),
        ("device node back → taint removed", &mut replug),
        ("replicas edited → slice republished", &mut edits),
        ("kubelet restart (wipe) → slices back", &mut restarts),
    ] {
        println!(
            "  {what}: p50 {:.1} ms, max {:.1} ms",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 1.0))
        );
    }
    println!(
        "  RSS (1 DRA + 4 device-plugin resources): idle {:.1} MiB, after the claims {:.1} MiB",
        idle_kib as f64 / 1024.0,
        loaded_kib as f64 / 1024.0
    );
    println!(
        "  host CPU while idle (slices published, no calls): {:.1} % of a core",
        idle_cpu * 100.0
    );
    let _ = child.kill().await;
}

#[tokio::main]
async fn main() {
    let claims: usize = std::env::var("WDP_BENCH_CLAIMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    println!(
        "DRA on the real binary ({}), {}",
        support::binary(),
        support::host_cpus_heading()
    );
    // The CDI folder on disk (as the tests have it), then on tmpfs as a
    // node's /var/run/cdi is; the checkpoint stays on disk either way.
    for cdi_on_tmpfs in [false, true] {
        run(false, claims, cdi_on_tmpfs).await;
        run(true, claims, cdi_on_tmpfs).await;
    }
}
