//! DRA partitions on the real binary: `cargo bench -p wasm-device-plugin
//! --bench dra_partitions`.
//!
//! The 8-GPU fixture (`tests/fixtures/gpu-server`) is served as DRA driver
//! `gpu.example.com` against the in-process API server and DRA kubelet
//! stand-in, each GPU offering the `partition_create` / `partition_remove`
//! attribute files the `gpu-partitions` guest writes. Printed:
//!
//! - on a 1.34 server, `NodePrepareResources` and `NodeUnprepareResources`
//!   round trips, p50/p99 over `WDP_BENCH_CLAIMS` claims (default 200),
//!   first serially, then from 8 concurrent callers (each on one GPU of its
//!   own), with throughput (claims prepared and unprepared per second):
//!   whole GPUs with the built-in policy (no hooks), then `1g.10gb`
//!   partitions (the 56 of the default profiles, each taken again and
//!   again) with the guest bound to `dra-layout`, `dra-prepare` and
//!   `dra-unprepare` — the prepare includes the guest's create write and
//!   the claim's `status.devices` write, the unprepare the remove write and
//!   the status removal;
//! - on a 1.34 and a 1.35 server, the JSON bytes of the pool's
//!   ResourceSlices as the API server holds them: the 8 whole GPUs, the
//!   default partitions (8 whole + 96 partitions) and bytes per partition;
//! - the largest partitioned layout, computed from the API's and the host's
//!   limits, then published (`slices = 128` with a one-slice profile: 1,024
//!   partitions asked for) and read back: partitions, slices, bytes.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use support::{Layout, ms, percentile};
use wdp_fake_apiserver::FakeApiServer;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet, SimKubelet};
use wdp_resource::MAX_PARTITIONS;

const NODE: &str = "bench-node";
const DRIVER: &str = "gpu.example.com";
const WAIT: Duration = Duration::from_secs(60);
const CALLERS: usize = 8;
const GPUS: usize = 8;
/// 8 whole GPUs and, per GPU, 7 + 3 + 2 partitions of the default profiles.
const DEFAULT_DEVICES: usize = GPUS + GPUS * 12;
/// The largest layout asked of the guest: 128 one-slice partitions per GPU
/// (128 × 640Mi = the GPU's 80Gi), 1,024 in all.
const LARGEST: &str = "slices = 128\nprofiles = \"1s=1:640Mi\"\n";

/// The API's ResourceSlice limits the largest layout runs into.
mod api {
    /// Devices per slice.
    pub const DEVICES: usize = 128;
    /// Devices per slice when one consumes counters (1.35 and later).
    pub const DEVICES_CONSUMING: usize = 64;
    /// Counter sets per slice (1.35 and later, sets in slices of their own).
    pub const SETS_PER_SLICE: usize = 8;
    /// Counters in all the sets of a slice (1.34).
    pub const COUNTERS_PER_SLICE: usize = 32;
    /// Counters consumed by all the devices of a slice (1.34).
    pub const CONSUMED_PER_SLICE: usize = 1024;
}

/// Counters in each GPU's set (`memory`, `slices`), all consumed by every
/// device drawing on it.
const SET_COUNTERS: usize = 2;

/// The largest partitioned layout of `gpus` GPUs (the guest's: one counter
/// set per GPU, every device consuming all its counters) a server of
/// `1.<minor>` takes: partitions, and the slices publishing it.
fn largest_layout(minor: u32, gpus: usize) -> (usize, usize) {
    let host_per_gpu = MAX_PARTITIONS / gpus;
    if minor >= 35 {
        // Sets in slices of their own; any number of device slices, each
        // of at most 64 consuming devices; one consumption per device (≤ 2).
        let devices = gpus * (1 + host_per_gpu);
        (
            gpus * host_per_gpu,
            gpus.div_ceil(api::SETS_PER_SLICE) + devices.div_ceil(api::DEVICES_CONSUMING),
        )
    } else {
        // A GPU's set travels with all its consumers in one slice.
        let per_gpu = host_per_gpu
            .min(api::DEVICES - 1)
            .min(api::CONSUMED_PER_SLICE / SET_COUNTERS - 1);
        let group = 1 + per_gpu;
        let groups_per_slice = (api::DEVICES / group)
            .min(api::COUNTERS_PER_SLICE / SET_COUNTERS)
            .min(api::CONSUMED_PER_SLICE / (SET_COUNTERS * group));
        (gpus * per_gpu, gpus.div_ceil(groups_per_slice))
    }
}

fn whole_config() -> String {
    format!(
        "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n\
         [[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
    )
}

/// The guest bound to the three DRA hooks, its writes granted; `extra`
/// goes into `[guest-config]`.
fn partitions_config(extra: &str) -> String {
    format!(
        "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\n\
         writable-attributes = [\"partition_create\", \"partition_remove\"]\n\
         [[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n\
         [hooks.dra-layout]\nguest = \"guests/partitions.wasm\"\n\
         [hooks.dra-prepare]\nguest = \"guests/partitions.wasm\"\n\
         [hooks.dra-unprepare]\nguest = \"guests/partitions.wasm\"\n\
         [guest-config]\n{extra}"
    )
}

/// The pool's slices when all of its newest generation are there.
fn current_pool(slices: &[ResourceSlice]) -> Option<Vec<&ResourceSlice>> {
    let ours: Vec<&ResourceSlice> = slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER && s.spec.node_name.as_deref() == Some(NODE))
        .collect();
    let generation = ours.iter().map(|s| s.spec.pool.generation).max()?;
    let newest: Vec<&ResourceSlice> = ours
        .into_iter()
        .filter(|s| s.spec.pool.generation == generation)
        .collect();
    (newest.len() as i64 == newest[0].spec.pool.resource_slice_count).then_some(newest)
}

fn device_count(slices: &[&ResourceSlice]) -> usize {
    slices
        .iter()
        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
        .sum()
}

/// What the API server holds of the pool: slices, devices, JSON bytes.
struct Publication {
    slices: usize,
    devices: usize,
    bytes: usize,
}

fn publication(api: &FakeApiServer) -> Publication {
    let all = api.slices();
    let pool = current_pool(&all).expect("a complete pool");
    Publication {
        slices: pool.len(),
        devices: device_count(&pool),
        bytes: pool
            .iter()
            .map(|s| serde_json::to_vec(s).unwrap().len())
            .sum(),
    }
}

/// A claim allocated `device` of the pool.
fn claim(n: usize, device: &str) -> ResourceClaim {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": format!("claim-{n}"), "namespace": "bench"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": device}
        ]}}}
    }))
    .unwrap()
}

/// One host process with its API server and kubelets.
struct Bench {
    layout: Layout,
    api: Arc<FakeApiServer>,
    dra: SimDraKubelet,
    _kubelet: SimKubelet,
    child: tokio::process::Child,
}

impl Bench {
    /// The fixture served as whole GPUs by a host talking to a `1.<minor>`
    /// server.
    async fn start(minor: u32) -> Self {
        let layout = Layout::new();
        let fixture = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/gpu-server/."
        );
        assert!(
            std::process::Command::new("cp")
                .args(["-a", fixture])
                .arg(&layout.root)
                .status()
                .unwrap()
                .success()
        );
        let devices = layout.root.join("sys/bus/pci/devices");
        let mut gpus = 0;
        for entry in std::fs::read_dir(&devices).unwrap() {
            let dir = entry.unwrap().path();
            if std::fs::read_to_string(dir.join("class")).is_ok_and(|c| c.starts_with("0x0302")) {
                for attribute in ["partition_create", "partition_remove"] {
                    std::fs::write(dir.canonicalize().unwrap().join(attribute), "").unwrap();
                }
                gpus += 1;
            }
        }
        assert_eq!(gpus, GPUS);
        std::fs::copy(
            wdp_guest_artifacts::GPU_PARTITIONS,
            layout.config.join("guests/partitions.wasm"),
        )
        .unwrap();
        std::fs::write(
            layout.config.join("host.toml"),
            "version = 1\npoll-interval-ms = 60000\n",
        )
        .unwrap();
        std::fs::write(layout.config.join("gpu.toml"), whole_config()).unwrap();

        let registry = layout.tmp.path().join("plugins_registry");
        std::fs::create_dir_all(&registry).unwrap();
        let api = Arc::new(FakeApiServer::start().await.unwrap());
        api.set_served_minor(minor);
        let kubeconfig = layout.tmp.path().join("kubeconfig");
        api.write_kubeconfig(&kubeconfig).unwrap();
        let dra = SimDraKubelet::start(&registry, DraSimOptions::default())
            .await
            .unwrap();
        let kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
        let child = layout.run_dra(&registry, &kubeconfig, NODE);
        dra.wait_registered(DRIVER, WAIT).await.unwrap();
        let bench = Self {
            layout,
            api,
            dra,
            _kubelet: kubelet,
            child,
        };
        bench.wait_devices(GPUS).await;
        bench
    }

    /// Rewrites the resource file (the host reloads it).
    fn configure(&self, text: &str) {
        std::fs::write(self.layout.config.join("gpu.toml"), text).unwrap();
    }

    /// Waits for a complete pool of `count` devices.
    async fn wait_devices(&self, count: usize) {
        self.api
            .wait_for_slices(
                |s| current_pool(s).is_some_and(|p| device_count(&p) == count),
                WAIT,
            )
            .await
            .unwrap_or_else(|e| panic!("waiting for {count} published devices: {e}"));
    }

    /// Waits for a complete pool of more than `count` devices, then until
    /// it has not changed for 3 s (the publisher writes at most once a
    /// second).
    async fn wait_settled_above(&self, count: usize) {
        self.api
            .wait_for_slices(
                |s| current_pool(s).is_some_and(|p| device_count(&p) > count),
                WAIT,
            )
            .await
            .unwrap_or_else(|e| panic!("waiting for more than {count} published devices: {e}"));
        let key = |api: &FakeApiServer| {
            let all = api.slices();
            current_pool(&all).map(|p| (p[0].spec.pool.generation, device_count(&p)))
        };
        let mut last = key(&self.api);
        let mut since = Instant::now();
        while since.elapsed() < Duration::from_secs(3) {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = key(&self.api);
            if now != last {
                (last, since) = (now, Instant::now());
            }
        }
    }

    /// Claim `n` on `device`: created, prepared, unprepared, deleted; the
    /// two round trips. With `status`, the claim's `status.devices` is
    /// checked after each.
    async fn cycle(&self, n: usize, device: &str, status: bool) -> (Duration, Duration) {
        let c = self.api.put_claim(claim(n, device));
        let reference = ClaimRef {
            namespace: "bench".to_owned(),
            uid: c.metadata.uid.clone().unwrap(),
            name: c.metadata.name.clone().unwrap(),
        };
        let name = format!("claim-{n}");
        let statuses = || {
            self.api
                .claim("bench", &name)
                .and_then(|c| c.status?.devices)
                .map_or(0, |d| d.len())
        };
        let prepared = self
            .dra
            .prepare(DRIVER, std::slice::from_ref(&reference))
            .await
            .unwrap();
        assert!(
            matches!(prepared.claims.get(&reference.uid), Some(Ok(d)) if !d.is_empty()),
            "claim {n} on {device} not prepared: {:?}",
            prepared.claims
        );
        if status {
            assert_eq!(statuses(), 1, "claim {n}: no device status written");
        }
        let unprepared = self
            .dra
            .unprepare(DRIVER, std::slice::from_ref(&reference))
            .await
            .unwrap();
        assert!(
            matches!(unprepared.claims.get(&reference.uid), Some(Ok(()))),
            "claim {n} on {device} not unprepared: {:?}",
            unprepared.claims
        );
        if status {
            assert_eq!(statuses(), 0, "claim {n}: device status left");
        }
        self.api.delete_claim("bench", &name);
        (prepared.elapsed, unprepared.elapsed)
    }

    /// `claims` claims serially over `lanes` (all devices in turn), then
    /// from one caller per lane, each over its lane's devices.
    async fn claims(&self, label: &str, lanes: &[Vec<String>], claims: usize, status: bool) {
        let all: Vec<&String> = lanes.iter().flatten().collect();
        let (mut prepare, mut unprepare) = (Vec::new(), Vec::new());
        let started = Instant::now();
        for n in 0..claims {
            let (p, u) = self.cycle(n, all[n % all.len()], status).await;
            prepare.push(p);
            unprepare.push(u);
        }
        let serial_rate = claims as f64 / started.elapsed().as_secs_f64();

        let per_caller = claims.div_ceil(lanes.len());
        let started = Instant::now();
        let callers = lanes.iter().enumerate().map(|(lane, devices)| async move {
            let mut samples = Vec::with_capacity(per_caller);
            for k in 0..per_caller {
                let n = claims + lane * per_caller + k;
                samples.push(self.cycle(n, &devices[k % devices.len()], status).await);
            }
            samples
        });
        let (mut parallel_prepare, mut parallel_unprepare): (Vec<Duration>, Vec<Duration>) =
            futures::future::join_all(callers)
                .await
                .into_iter()
                .flatten()
                .unzip();
        let parallel_rate = parallel_prepare.len() as f64 / started.elapsed().as_secs_f64();

        println!("\n{label}, {} devices:", all.len());
        let p = |samples: &mut Vec<Duration>| {
            format!(
                "p50 {:.2} ms, p99 {:.2} ms",
                ms(percentile(samples, 0.5)),
                ms(percentile(samples, 0.99))
            )
        };
        println!(
            "  serial ({claims} claims): prepare {}; unprepare {}; {serial_rate:.0} claims/s",
            p(&mut prepare),
            p(&mut unprepare)
        );
        println!(
            "  {} callers ({} claims): prepare {}; unprepare {}; {parallel_rate:.0} claims/s (x{:.1} serial)",
            lanes.len(),
            parallel_prepare.len(),
            p(&mut parallel_prepare),
            p(&mut parallel_unprepare),
            parallel_rate / serial_rate
        );
    }

    /// The pool's size now, printed; returns its bytes.
    fn print_publication(&self, what: &str) -> usize {
        let p = publication(&self.api);
        println!(
            "  {what}: {} devices in {} slice(s), {} bytes ({:.1} KiB)",
            p.devices,
            p.slices,
            p.bytes,
            p.bytes as f64 / 1024.0
        );
        p.bytes
    }

    /// Publication sizes on this server: whole GPUs (already published),
    /// the default partitions, then the largest layout.
    async fn publication_figures(&self, minor: u32) {
        println!("\npublished on a 1.{minor} server:");
        self.configure(&whole_config());
        self.wait_devices(GPUS).await;
        let whole = self.print_publication("8 whole GPUs");
        self.configure(&partitions_config(""));
        self.wait_devices(DEFAULT_DEVICES).await;
        let partitioned = self.print_publication("8 GPUs + 96 partitions (default profiles)");
        let partitions = DEFAULT_DEVICES - GPUS;
        println!(
            "  partitions add {} bytes, {:.0} bytes per partition",
            partitioned - whole,
            (partitioned - whole) as f64 / partitions as f64
        );

        let (expected, expected_slices) = largest_layout(minor, GPUS);
        self.configure(&partitions_config(LARGEST));
        let started = Instant::now();
        self.wait_settled_above(DEFAULT_DEVICES).await;
        let settled = started.elapsed().saturating_sub(Duration::from_secs(3));
        let p = publication(&self.api);
        println!(
            "  largest (1,024 one-slice partitions asked for): {} partitions published in {} slices, \
             {} bytes ({:.1} KiB, {:.0} bytes per device); from the limits: {expected} partitions \
             in {expected_slices} slices; settled {:.1} s after the edit",
            p.devices - GPUS,
            p.slices,
            p.bytes,
            p.bytes as f64 / 1024.0,
            p.bytes as f64 / p.devices as f64,
            settled.as_secs_f64()
        );
    }
}

#[tokio::main]
async fn main() {
    let claims: usize = std::env::var("WDP_BENCH_CLAIMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    println!(
        "DRA partitions on the real binary ({}), 8-GPU fixture",
        support::binary()
    );

    let mut bench = Bench::start(34).await;
    let all = bench.api.slices();
    let mut whole: Vec<String> = current_pool(&all)
        .unwrap()
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| d.name.clone())
        .collect();
    whole.sort();
    let lanes: Vec<Vec<String>> = whole.into_iter().map(|d| vec![d]).collect();
    bench
        .claims("whole GPU, built-in policy (1.34)", &lanes, claims, false)
        .await;

    bench.configure(&partitions_config(""));
    bench.wait_devices(DEFAULT_DEVICES).await;
    // The guest names each GPU's partitions by its PCI address.
    let lanes: Vec<Vec<String>> = [
        "0000-03-00-0",
        "0000-04-00-0",
        "0000-07-00-0",
        "0000-08-00-0",
        "0000-83-00-0",
        "0000-84-00-0",
        "0000-87-00-0",
        "0000-88-00-0",
    ]
    .into_iter()
    .map(|gpu| (0..7).map(|i| format!("gpu-{gpu}-1g-10gb-{i}")).collect())
    .collect();
    assert_eq!(lanes.len(), CALLERS);
    bench
        .claims(
            "1g.10gb partition, gpu-partitions guest (1.34)",
            &lanes,
            claims,
            true,
        )
        .await;

    bench.publication_figures(34).await;
    let _ = bench.child.kill().await;
    drop(bench);

    let mut bench = Bench::start(35).await;
    bench.publication_figures(35).await;
    let _ = bench.child.kill().await;
}
