//! The ResourceSlice publisher's API writes under device churn, against the
//! in-process API server: `cargo bench -p wdp-dra-client --bench write_budget`.
//!
//! Printed:
//!
//! - a device flapping healthy/unhealthy every 100 ms for a minute, with the
//!   default 1 s write interval. Time runs ten times faster (a flap every
//!   10 ms, a 100 ms interval, for 6 s): the ratio of flap period, interval
//!   and duration is the real one, and a pass takes a few milliseconds
//!   against this server, so the counts are those of the real minute. Set
//!   `WDP_BENCH_REAL_TIME=1` to run the full minute at the real periods;
//! - 1,000 devices turning unhealthy at once, with the default interval:
//!   as one device list, and as 1,000 lists one device apart (a health
//!   check reporting devices one by one), until all are tainted on the
//!   server.
//!
//! Each line gives passes (each lists the pool once) and write requests
//! (creates, replaces, deletes), beside the changes handed to the publisher.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use wdp_dra_client::{
    AttributeValue, DEFAULT_MIN_WRITE_INTERVAL, DeviceTaint, DraDevice, PoolTarget, PublishStatus,
    PublisherHandle, SlicePublisher, TaintEffect,
};
use wdp_fake_apiserver::FakeApiServer;

const DRIVER: &str = "gpu.example.com";
const NODE: &str = "bench-node";
const WAIT: Duration = Duration::from_secs(60);

struct Bench {
    server: FakeApiServer,
    client: kube::Client,
    _dir: tempfile::TempDir,
}

impl Bench {
    async fn start() -> Self {
        let server = FakeApiServer::start()
            .await
            .expect("the fake API server starts");
        let dir = tempfile::tempdir().expect("a temporary folder");
        let kubeconfig = dir.path().join("kubeconfig");
        server.write_kubeconfig(&kubeconfig).expect("a kubeconfig");
        let client = wdp_dra_client::client(Some(&kubeconfig))
            .await
            .expect("a client");
        Self {
            server,
            client,
            _dir: dir,
        }
    }

    fn publisher(&self, interval: Duration) -> PublisherHandle {
        let target = PoolTarget::new(DRIVER, NODE).with_min_write_interval(interval);
        SlicePublisher::spawn(self.client.clone(), target, CancellationToken::new())
    }

    fn writes(&self) -> u64 {
        let stats = self.server.stats();
        stats.slice_creates + stats.slice_updates + stats.slice_deletes
    }

    /// Waits until the server's pool holds `tainted` tainted devices with `value`s as given.
    async fn until_tainted(&self, tainted: usize, value: Option<&str>) {
        let holds = |slices: &[wdp_fake_apiserver::ResourceSlice]| {
            slices
                .iter()
                .flat_map(|s| s.spec.devices.iter().flatten())
                .flat_map(|d| d.taints.iter().flatten())
                .filter(|t| value.is_none() || t.value.as_deref() == value)
                .count()
                == tainted
        };
        self.server
            .wait_for_slices(holds, WAIT)
            .await
            .expect("the pool reaches the newest state");
    }
}

fn gpus(count: usize) -> Vec<DraDevice> {
    (0..count)
        .map(|index| {
            DraDevice::new(format!("gpu{index}"))
                .with_attribute("model", AttributeValue::String("H100".into()))
                .with_attribute("index", AttributeValue::Int(index as i64))
        })
        .collect()
}

fn taint(value: String) -> DeviceTaint {
    DeviceTaint {
        key: format!("{DRIVER}/unhealthy"),
        value,
        effect: TaintEffect::NoSchedule,
    }
}

async fn published(publisher: &PublisherHandle) -> PublishStatus {
    let mut status = publisher.status();
    tokio::time::timeout(WAIT, status.wait_for(|s| s.published.is_some()))
        .await
        .expect("published in time")
        .expect("the publisher runs")
        .clone()
}

fn passes(status: &PublishStatus) -> u64 {
    status.passes + status.failed_passes
}

/// A node of 8 GPUs, one flapping every `flap` for `duration`.
async fn flapping(scale: u32) {
    let flap = Duration::from_millis(100) / scale;
    let interval = DEFAULT_MIN_WRITE_INTERVAL / scale;
    let duration = Duration::from_secs(60) / scale;
    let bench = Bench::start().await;
    let publisher = bench.publisher(interval);
    publisher.publish(gpus(8));
    let before = published(&publisher).await;
    let writes_before = bench.writes();

    let mut ticks = tokio::time::interval(flap);
    let started = Instant::now();
    let mut changes = 0u32;
    let newest = loop {
        ticks.tick().await;
        changes += 1;
        let mut devices = gpus(8);
        // Unhealthy spells carry their own reason, so the newest state is unique.
        let reason = (changes % 2 == 1).then(|| format!("xid-{changes}"));
        if let Some(reason) = &reason {
            devices[3] = devices[3].clone().with_taint(taint(reason.clone()));
        }
        publisher.publish(devices);
        if let Some(reason) = reason.filter(|_| started.elapsed() >= duration) {
            break reason;
        }
    };
    bench.until_tainted(1, Some(&newest)).await;
    let took = started.elapsed();
    let after = publisher.status().borrow().clone();
    let writes = bench.writes() - writes_before;
    let passes = passes(&after) - passes(&before);
    let per_minute = |count: u64| count as f64 * 60.0 / (took.as_secs_f64() * f64::from(scale));
    println!(
        "flapping device (every {:?}, interval {:?}, {:?}{}): {changes} changes -> {passes} passes, {writes} writes; per real minute: {:.0} changes, {:.0} passes, {:.0} writes; newest state on the server",
        flap * scale,
        interval * scale,
        took,
        if scale > 1 {
            format!(", time x{scale}")
        } else {
            String::new()
        },
        per_minute(u64::from(changes)),
        per_minute(passes),
        per_minute(writes),
    );
    publisher.stop().await;
}

/// 1,000 devices turning unhealthy: in one list, or one list per device.
async fn thousand_devices(one_by_one: bool) {
    let bench = Bench::start().await;
    let publisher = bench.publisher(DEFAULT_MIN_WRITE_INTERVAL);
    let mut devices = gpus(1000);
    publisher.publish(devices.clone());
    let before = published(&publisher).await;
    let writes_before = bench.writes();
    // Quiet for an interval first, as a node is before such an event.
    tokio::time::sleep(DEFAULT_MIN_WRITE_INTERVAL).await;

    let started = Instant::now();
    let mut lists = 0;
    for index in 0..devices.len() {
        devices[index] = devices[index]
            .clone()
            .with_taint(taint("xid-79".to_owned()));
        if one_by_one {
            publisher.publish(devices.clone());
            lists += 1;
        }
    }
    if !one_by_one {
        publisher.publish(devices.clone());
        lists += 1;
    }
    let handed_over = started.elapsed();
    bench.until_tainted(1000, None).await;
    let took = started.elapsed();
    let after = publisher.status().borrow().clone();
    println!(
        "1,000 devices unhealthy at once, {lists} device list(s) handed over in {handed_over:?}: {} passes, {} writes, all tainted on the server after {took:?} (pool of {} slices)",
        passes(&after) - passes(&before),
        bench.writes() - writes_before,
        after.published.map(|p| p.slices).unwrap_or_default(),
    );
    publisher.stop().await;
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(async {
        let real_time = std::env::var_os("WDP_BENCH_REAL_TIME").is_some_and(|v| v == "1");
        flapping(if real_time { 1 } else { 10 }).await;
        thousand_devices(false).await;
        thousand_devices(true).await;
    });
}
