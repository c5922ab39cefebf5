//! What the publisher logs while failing: one WARN per change of error state,
//! one INFO on recovery, one WARN per change of what is left out of the pool,
//! one WARN when the server drops taints, one ERROR when it drops counters or
//! sharing. A test binary
//! of its own, because it installs the process-wide log subscriber.

use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::common::*;
use wdp_dra_client::{AttributeValue, Capacity, CounterSet, DraDevice, PoolContent};

/// Collects every formatted log line.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines_with(&self, level: &str, text: &str) -> usize {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|line| line.contains(level) && line.contains(text))
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_warn_once_per_error_state_and_recovery_is_told() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();

    let cluster = Cluster::start().await;

    // A rejected create: its message names a slice name the server generated
    // anew for each retry, yet it is one error state, so one WARN.
    let mut bad_pool = target();
    bad_pool.pool_name = "Bad_Pool".into();
    let rejected = cluster.publisher(bad_pool);
    let mut rejected_status = rejected.status();
    rejected.publish(gpus(1));
    status_where(&mut rejected_status, "three rejected passes", |s| {
        s.failed_passes >= 3
    })
    .await;
    assert_eq!(
        captured.lines_with("WARN", "publishing ResourceSlices failed"),
        1
    );
    rejected.stop().await;

    // A device the server would reject is left out: one WARN naming it,
    // however many passes see it.
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let bad = DraDevice::new("gpu9").with_attribute("s", AttributeValue::String("s".repeat(65)));
    let mut with_bad = gpus(1);
    with_bad.push(bad);
    publisher.publish(with_bad.clone());
    status_where(&mut status, "a published pool", |s| s.published.is_some()).await;
    with_bad.reverse();
    let passes = status.borrow().passes;
    publisher.publish(with_bad);
    status_where(&mut status, "another pass", |s| s.passes > passes).await;
    assert_eq!(captured.lines_with("WARN", "device \"gpu9\""), 1);

    // An outage is an error state: one WARN, then one INFO on recovery.
    cluster.server.set_refusing(true);
    let failed = status.borrow().failed_passes;
    publisher.publish(gpus(2));
    status_where(&mut status, "four failed passes", |s| {
        s.failed_passes >= failed + 4
    })
    .await;
    assert_eq!(
        captured.lines_with("WARN", "publishing ResourceSlices failed"),
        2
    );
    cluster.server.set_refusing(false);
    status_where(&mut status, "recovery", |s| s.error.is_none()).await;
    assert_eq!(captured.lines_with("INFO", "works again"), 1);

    cluster.server.set_taints_dropped(true);
    let mut tainted = gpus(1);
    tainted[0] = tainted[0].clone().with_taint(unhealthy_taint());
    publisher.publish(tainted.clone());
    status_where(&mut status, "taints seen dropped", |s| s.taints_dropped).await;
    let passes = status.borrow().passes;
    publisher.publish(tainted);
    status_where(&mut status, "another pass", |s| s.passes > passes).await;
    assert_eq!(captured.lines_with("WARN", "DRADeviceTaints"), 1);
    publisher.stop().await;

    // Dropped counters and sharing: one ERROR each, naming driver and node,
    // however many passes follow.
    cluster.server.set_partitions_dropped(true);
    cluster.server.set_consumable_capacity_dropped(true);
    let publisher = cluster.publisher(target());
    let mut status = publisher.status();
    let pool = || PoolContent {
        counter_sets: vec![CounterSet::new("gpu0-counters", [("memory", "40Gi")])],
        devices: vec![
            DraDevice::new("gpu0").consuming("gpu0-counters", [("memory", "40Gi")]),
            DraDevice::new("gpu0-half0")
                .consuming("gpu0-counters", [("memory", "20Gi")])
                .partition_of("gpu0"),
            DraDevice::new("nic0")
                .shared()
                .with_capacity("bandwidth", Capacity::new("10G")),
        ],
    };
    publisher.publish_pool(pool());
    status_where(&mut status, "both drops seen", |s| {
        s.partitions_dropped && s.consumable_capacity_dropped
    })
    .await;
    for _ in 0..2 {
        let passes = status.borrow().passes;
        publisher.publish_pool(pool());
        status_where(&mut status, "another pass", |s| s.passes > passes).await;
    }
    let partitions = "the API server dropped sharedCounters/consumesCounters: the DRAPartitionableDevices feature gate is off; publishing whole devices only";
    assert_eq!(captured.lines_with("ERROR", partitions), 1);
    assert_eq!(captured.lines_with("ERROR", "DRAConsumableCapacity"), 1);
    let naming = format!("driver={DRIVER} node={NODE}");
    assert_eq!(captured.lines_with(&naming, partitions), 1);
    publisher.stop().await;
}
