//! Bind and unbind (restore) time per IOMMU group on the fixture trees,
//! with the kernel stand-in answering the sysfs writes: p50 and p90 over
//! `ROUNDS` rounds (default 50) per group. What it measures is the host's
//! side (journal writes with fsync, sysfs writes, waits for links and
//! nodes) plus the stand-in's FIFO round trip; a real driver's remove
//! and probe add their own time on a node.
//!
//! `cargo run --release -p wdp-passthrough --example bind_timing`

use std::path::Path;
use std::time::{Duration, Instant};

use wdp_passthrough::{BindSettings, Binder, FileJournal, Journal};
use wdp_test_support::fixtures::{copy_fixture, repo_root};
use wdp_test_support::kernel_standin::KernelStandin;
use wdp_test_support::measure::{ms, percentile};

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(50);
    println!("bind and unbind per IOMMU group, {rounds} rounds, kernel stand-in");
    println!(
        "{:<64} {:>9} {:>9} {:>11} {:>11}",
        "group", "bind p50", "bind p90", "unbind p50", "unbind p90"
    );
    measure(
        "vfio-host group 30 (GPU + audio, 2 functions)",
        "vfio-host",
        "0000:17:00.0",
        rounds,
        |standin| {
            standin.set_driver("0000:17:00.0", Some("nvidia"));
            standin.set_driver("0000:17:00.1", Some("snd_hda_intel"));
        },
    );
    measure(
        "gpu-server group 13 (H100, 1 function)",
        "gpu-server",
        "0000:03:00.0",
        rounds,
        |_| {},
    );
    measure(
        "recorded H100 VM, group 5 added (1 function)",
        "h100-vm",
        "0000:00:06.0",
        rounds,
        |_| {},
    );
}

fn measure(
    label: &str,
    fixture: &str,
    device: &str,
    rounds: usize,
    setup: impl FnOnce(&KernelStandin),
) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    if fixture == "h100-vm" {
        unpack_h100(&root);
    } else {
        copy_fixture(fixture, &root);
    }
    let standin = KernelStandin::start(&root);
    setup(&standin);
    let binder = Binder::new(
        &root,
        BindSettings {
            deadline: Duration::from_secs(10),
        },
    );
    let file = FileJournal::open(dir.path().join("journal.json")).unwrap();
    let memory = MemoryJournal::default();
    for (journal, kind) in [
        (&file as &dyn Journal, "file journal"),
        (&memory, "in-memory journal"),
    ] {
        let (binds, unbinds) = rounds_of(&binder, journal, device, rounds);
        print(&format!("{label}, {kind}"), binds, unbinds);
    }
}

/// Binds and restores `device`'s group `rounds` times.
fn rounds_of(
    binder: &Binder,
    journal: &dyn Journal,
    device: &str,
    rounds: usize,
) -> (Vec<Duration>, Vec<Duration>) {
    let (mut binds, mut unbinds) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let plan = binder.plan(device, "vfio-pci", &|_| None).unwrap();
        let start = Instant::now();
        binder.bind("claim", &plan, journal).unwrap();
        binds.push(start.elapsed());
        let record = journal.records().unwrap().remove(0);
        let start = Instant::now();
        binder.restore(&record, journal).unwrap();
        unbinds.push(start.elapsed());
    }
    (binds, unbinds)
}

fn print(label: &str, mut binds: Vec<Duration>, mut unbinds: Vec<Duration>) {
    println!(
        "{label:<64} {:>6.2} ms {:>6.2} ms {:>8.2} ms {:>8.2} ms",
        ms(percentile(&mut binds, 0.5)),
        ms(percentile(&mut binds, 0.9)),
        ms(percentile(&mut unbinds, 0.5)),
        ms(percentile(&mut unbinds, 0.9)),
    );
}

/// The recorded H100 VM with the IOMMU group a kernel with the IOMMU on
/// would show (group 5).
fn unpack_h100(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let status = std::process::Command::new("tar")
        .arg("xzf")
        .arg(repo_root().join("tests/fixtures/real-nodes/h100-vm.tgz"))
        .arg("-C")
        .arg(root)
        .arg("--strip-components=1")
        .status()
        .unwrap();
    assert!(status.success());
    let gpu = root.join("sys/devices/pci0000:00/0000:00:06.0");
    std::fs::create_dir_all(root.join("sys/kernel/iommu_groups/5/devices")).unwrap();
    std::os::unix::fs::symlink("../../../kernel/iommu_groups/5", gpu.join("iommu_group")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../devices/pci0000:00/0000:00:06.0",
        root.join("sys/kernel/iommu_groups/5/devices/0000:00:06.0"),
    )
    .unwrap();
}

/// A journal without a file: what the binds cost without the fsyncs.
#[derive(Default)]
struct MemoryJournal(std::sync::Mutex<Vec<wdp_passthrough::GroupRecord>>);

impl Journal for MemoryJournal {
    fn record(
        &self,
        record: &wdp_passthrough::GroupRecord,
    ) -> Result<(), wdp_passthrough::JournalError> {
        let mut records = self.0.lock().unwrap();
        records.retain(|r| r.group != record.group);
        records.push(record.clone());
        Ok(())
    }

    fn forget(&self, group: &str) -> Result<(), wdp_passthrough::JournalError> {
        self.0.lock().unwrap().retain(|r| r.group != group);
        Ok(())
    }

    fn records(&self) -> Result<Vec<wdp_passthrough::GroupRecord>, wdp_passthrough::JournalError> {
        Ok(self.0.lock().unwrap().clone())
    }
}
