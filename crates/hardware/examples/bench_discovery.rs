//! Discovery benchmark: a generated host tree with 1,000 PCI functions
//! (100 root ports, 225 GPUs with DRM render nodes, 675 NICs) and 10,000
//! device nodes, discovered repeatedly; prints p50/p99 per scenario. Then the
//! change watcher's latency: a node is removed (and put back) and the time
//! until the receiver wakes, and until a rescan shows it, is measured.
//!
//! Run: `cargo run --release -p wdp-hardware --example bench_discovery [ITERATIONS]`
//! (the tree goes to `/dev/shm` when present, like sysfs and devtmpfs an
//! in-memory filesystem; set `BENCH_DIR` to put it elsewhere; `BENCH_ONLY=text`
//! runs only the scenarios whose name contains `text`).

use std::path::Path;
use std::time::{Duration, Instant};

use wdp_test_support::measure::percentile;

use wdp_hardware::{
    ChangeWatcher, HostRoot, NodeSelector, PciSelector, Selector, discover, watch_paths,
};

const ROOT_PORTS: usize = 100;
const ENDPOINTS_PER_PORT: usize = 9;
const NODES: usize = 10_000;

fn write(path: &Path, content: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn link(target: &str, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, at).unwrap();
}

/// One function's directory (relative to `/sys/devices`) and its files.
#[allow(clippy::too_many_arguments)]
fn function(
    root: &Path,
    rel: &str,
    addr: &str,
    vendor: &str,
    device: &str,
    class: &str,
    driver: &str,
    numa: usize,
    group: usize,
) {
    let depth = rel.matches('/').count() + 2; // from the function dir up to /sys
    let up = "../".repeat(depth);
    let dir = root.join("sys/devices").join(rel);
    for (file, value) in [
        ("vendor", vendor),
        ("device", device),
        ("class", class),
        ("subsystem_vendor", vendor),
        ("subsystem_device", "0x0001"),
        ("numa_node", if numa == 0 { "0" } else { "1" }),
        ("local_cpulist", if numa == 0 { "0-31" } else { "32-63" }),
        ("current_link_speed", "16.0 GT/s PCIe"),
        ("current_link_width", "16"),
        ("max_link_speed", "16.0 GT/s PCIe"),
        ("max_link_width", "16"),
    ] {
        write(&dir.join(file), &format!("{value}\n"));
    }
    link(
        &format!("{up}bus/pci/drivers/{driver}"),
        &dir.join("driver"),
    );
    link(
        &format!("{up}kernel/iommu_groups/{group}"),
        &dir.join("iommu_group"),
    );
    std::fs::create_dir_all(root.join(format!("sys/bus/pci/drivers/{driver}"))).unwrap();
    std::fs::create_dir_all(root.join(format!("sys/kernel/iommu_groups/{group}"))).unwrap();
    link(
        &format!("../../../devices/{rel}"),
        &root.join("sys/bus/pci/devices").join(addr),
    );
}

fn generate(root: &Path) -> usize {
    write(
        &root.join("sys/devices/system/node/node0/cpulist"),
        "0-31\n",
    );
    write(
        &root.join("sys/devices/system/node/node1/cpulist"),
        "32-63\n",
    );
    let mut group = 0;
    let mut gpus = 0;
    for port in 0..ROOT_PORTS {
        let numa = port * 2 / ROOT_PORTS;
        let rp = format!("0000:00:{:02x}.{}", port / 8, port % 8);
        let rp_rel = format!("pci0000:00/{rp}");
        function(
            root, &rp_rel, &rp, "0x8086", "0x352a", "0x060400", "pcieport", numa, group,
        );
        group += 1;
        for dev in 0..ENDPOINTS_PER_PORT {
            let addr = format!("0000:{:02x}:{dev:02x}.0", port + 1);
            let rel = format!("{rp_rel}/{addr}");
            if dev < 2 || (dev == 2 && port % 4 == 0) {
                function(
                    root, &rel, &addr, "0x10de", "0x2330", "0x030200", "nvidia", numa, group,
                );
                let render = 128 + gpus;
                let drm = root
                    .join("sys/devices")
                    .join(&rel)
                    .join(format!("drm/renderD{render}"));
                write(&drm.join("dev"), &format!("226:{render}\n"));
                write(
                    &drm.join("uevent"),
                    &format!("MAJOR=226\nMINOR={render}\nDEVNAME=dri/renderD{render}\n"),
                );
                write(&root.join(format!("dev/dri/renderD{render}")), "");
                gpus += 1;
            } else {
                function(
                    root, &rel, &addr, "0x8086", "0x159b", "0x020000", "ice", numa, group,
                );
            }
            group += 1;
        }
    }
    for i in 0..NODES {
        write(&root.join(format!("dev/bench/node{i:05}")), "");
    }
    gpus
}

fn report(name: &str, mut times: Vec<Duration>, found: usize) {
    println!(
        "{name:<48} {found:>6} found   p50 {:>8.2} ms   p99 {:>8.2} ms",
        percentile(&mut times, 0.50).as_secs_f64() * 1e3,
        percentile(&mut times, 0.99).as_secs_f64() * 1e3,
    );
}

/// CPU time (user + system) of the whole process so far, all threads, from
/// `/proc/self/stat` (USER_HZ = 100 ticks a second on Linux): other load on
/// the machine does not inflate it the way it does wall time.
fn cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses.
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn bench(root: &HostRoot, name: &str, selectors: &[Selector], iterations: usize) {
    if let Ok(only) = std::env::var("BENCH_ONLY")
        && !name.contains(&only)
    {
        return;
    }
    let warm = discover(root, selectors).unwrap();
    assert!(
        warm.warnings.is_empty(),
        "{:?}",
        &warm.warnings[..3.min(warm.warnings.len())]
    );
    let cpu_start = cpu_time();
    let times = (0..iterations)
        .map(|_| {
            let start = Instant::now();
            let scan = discover(root, selectors).unwrap();
            let elapsed = start.elapsed();
            assert_eq!(scan.candidates.len(), warm.candidates.len());
            elapsed
        })
        .collect();
    let cpu = cpu_start
        .zip(cpu_time())
        .map(|(a, b)| (b - a) / iterations as u32);
    report(name, times, warm.candidates.len());
    if let Some(cpu) = cpu {
        println!(
            "{:<48} {:>13} mean CPU    {:>8.2} ms",
            "",
            "",
            cpu.as_secs_f64() * 1e3
        );
    }
}

fn main() {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let dir = bench_dir();
    let start = Instant::now();
    let gpus = generate(dir.path());
    println!(
        "tree: {} PCI functions ({gpus} GPUs), {NODES} nodes, generated in {:.1} s under {}",
        ROOT_PORTS * (1 + ENDPOINTS_PER_PORT),
        start.elapsed().as_secs_f64(),
        dir.path().display()
    );
    let root = HostRoot::new(dir.path());
    let gpus_sel = Selector::Pci(PciSelector {
        vendor: Some("10de".into()),
        class: Some("0x0302".into()),
        ..Default::default()
    });
    let all_pci = Selector::Pci(PciSelector::default());
    let nodes = Selector::Nodes(NodeSelector {
        path: "/dev/bench/node*".into(),
        optional: false,
    });
    println!("{iterations} iterations each");
    bench(
        &root,
        "PCI: GPUs of 1,000 functions",
        std::slice::from_ref(&gpus_sel),
        iterations,
    );
    bench(
        &root,
        "PCI: all 1,000 functions",
        std::slice::from_ref(&all_pci),
        iterations,
    );
    bench(
        &root,
        "nodes: 10,000 by glob",
        std::slice::from_ref(&nodes),
        iterations,
    );
    bench(
        &root,
        "GPUs of 1,000 functions + 10,000 nodes",
        &[gpus_sel.clone(), nodes.clone()],
        iterations,
    );
    bench(
        &root,
        "all 1,000 functions + 10,000 nodes",
        &[all_pci, nodes.clone()],
        iterations,
    );

    if std::env::var_os("BENCH_ONLY").is_some() {
        return;
    }
    change_latency(&root, dir.path(), [gpus_sel, nodes]);
}

/// Where the tree is built: sysfs and devtmpfs live in memory, so on
/// tmpfs when the machine has one (/dev/shm), else in the default temp
/// dir; `BENCH_DIR` when set.
fn bench_dir() -> tempfile::TempDir {
    match std::env::var_os("BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None if Path::new("/dev/shm").is_dir() => tempfile::tempdir_in("/dev/shm")
            .or_else(|_| tempfile::tempdir())
            .unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

/// Change latency: remove a node of the tree at `dir`, wait for the
/// signal, rescan with `selectors`; then put it back.
fn change_latency(root: &HostRoot, dir: &Path, selectors: [Selector; 2]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let scan = discover(root, &selectors).unwrap();
        let watcher = ChangeWatcher::new(root);
        let warnings = watcher.set_paths(&watch_paths(root, &selectors, &scan.candidates));
        assert!(warnings.is_empty(), "{warnings:?}");
        let mut rx = watcher.subscribe();
        let rounds = 100;
        let (mut signal, mut updated) = (Vec::new(), Vec::new());
        for i in 0..rounds {
            let node = dir.join(format!("dev/bench/node{:05}", i * 97));
            let start = Instant::now();
            std::fs::remove_file(&node).unwrap();
            tokio::time::timeout(Duration::from_secs(5), rx.changed())
                .await
                .expect("no change signal");
            signal.push(start.elapsed());
            let scan = discover(root, &selectors).unwrap();
            assert_eq!(scan.candidates.len(), 225 + NODES - 1);
            updated.push(start.elapsed());
            std::fs::write(&node, "").unwrap();
            tokio::time::timeout(Duration::from_secs(5), rx.changed())
                .await
                .expect("no change signal");
            while rx.take_changed() {}
        }
        report("node removed → change signal", signal, rounds);
        report("node removed → rescan done (GPUs + nodes)", updated, rounds);
    });
}
