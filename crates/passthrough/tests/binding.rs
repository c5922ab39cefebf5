//! Binding IOMMU groups to vfio-pci and back on the fixture trees, with
//! the kernel stand-in reacting to the host's sysfs writes: what an
//! operator would see afterwards (drivers, `/dev/vfio` nodes, the
//! journal, the errors' words).

mod support;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use support::{AUDIO, GPU, World, add_h100_group, nobody};
use wdp_passthrough::{BindError, FileJournal, Journal, Phase, RecoveryOutcome};

const DEADLINE: Duration = Duration::from_secs(10);
const CLAIM: &str = "claim-a";

#[test]
fn group_30_moves_from_its_native_drivers_to_vfio_pci_and_back() {
    let world = World::vfio_host_native(DEADLINE);
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    assert_eq!(plan.group, "30");
    let planned: Vec<_> = plan
        .functions
        .iter()
        .map(|f| (f.address.as_str(), f.driver.as_deref(), f.class))
        .collect();
    assert_eq!(
        planned,
        [
            (GPU, Some("nvidia"), 0x030000),
            (AUDIO, Some("snd_hda_intel"), 0x040300)
        ]
    );

    let bound = world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(bound.group, "30");
    assert_eq!(bound.nodes, ["/dev/vfio/30", "/dev/vfio/vfio"]);
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
    assert_eq!(world.driver(AUDIO).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/30"));
    let records = world.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].phase, Phase::Bound);
    assert_eq!(records[0].claim_uid, CLAIM);
    let previous: Vec<_> = records[0]
        .functions
        .iter()
        .map(|f| (f.address.as_str(), f.previous_driver.as_deref()))
        .collect();
    assert_eq!(
        previous,
        [(GPU, Some("nvidia")), (AUDIO, Some("snd_hda_intel"))]
    );
    // The journal on disk says the same (what a restarted host reads).
    let reread = FileJournal::open(world.journal_path()).unwrap();
    assert_eq!(reread.records().unwrap(), records);
    // The order of the writes: both unbound, then both probed.
    let writes = world.standin.writes();
    assert_eq!(
        writes,
        [
            ("/sys/bus/pci/drivers/nvidia/unbind".into(), GPU.into()),
            (
                "/sys/bus/pci/drivers/snd_hda_intel/unbind".into(),
                AUDIO.into()
            ),
            ("/sys/bus/pci/drivers_probe".into(), GPU.into()),
            ("/sys/bus/pci/drivers_probe".into(), AUDIO.into()),
        ]
    );

    // A retried prepare finds it bound and writes nothing.
    let again = world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(again, bound);
    assert_eq!(world.standin.writes().len(), 4);

    world.binder.restore(&records[0], &world.journal).unwrap();
    assert_eq!(world.driver(GPU).as_deref(), Some("nvidia"));
    assert_eq!(world.driver(AUDIO).as_deref(), Some("snd_hda_intel"));
    assert!(!world.exists("/dev/vfio/30"));
    assert!(!world.exists("/sys/devices/virtual/vfio/30"));
    assert!(world.records().is_empty());
    for f in [GPU, AUDIO] {
        let value = world.read(&format!("/sys/bus/pci/devices/{f}/driver_override"));
        assert_eq!(value.trim(), "", "{f}");
    }
    // A second restore finds nothing to do.
    let writes = world.standin.writes().len();
    world.binder.restore(&records[0], &world.journal).unwrap();
    assert_eq!(world.standin.writes().len(), writes);
}

#[test]
fn a_gpu_server_gpu_moves_from_nvidia_and_back() {
    let world = World::new("gpu-server", DEADLINE, |_| {});
    let gpu = "0000:03:00.0";
    let plan = world.binder.plan(gpu, "vfio-pci", &nobody).unwrap();
    assert_eq!(plan.group, "13");
    assert_eq!(plan.functions.len(), 1);
    world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(world.driver(gpu).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/13"));
    // Its neighbour behind the same switch is untouched.
    assert_eq!(world.driver("0000:04:00.0").as_deref(), Some("nvidia"));
    let record = world.records().remove(0);
    world.binder.restore(&record, &world.journal).unwrap();
    assert_eq!(world.driver(gpu).as_deref(), Some("nvidia"));
    assert!(!world.exists("/dev/vfio/13"));
}

#[test]
fn a_group_already_on_vfio_pci_is_granted_and_left_there() {
    let world = World::new("vfio-host", DEADLINE, |_| {});
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let bound = world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(bound.nodes, ["/dev/vfio/30", "/dev/vfio/vfio"]);
    assert!(world.standin.writes().is_empty());
    let record = world.records().remove(0);
    world.binder.restore(&record, &world.journal).unwrap();
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/30"));
    assert!(world.standin.writes().is_empty());
    assert!(world.records().is_empty());
}

#[test]
fn the_recorded_h100_has_no_iommu_group_and_is_refused_saying_so() {
    let world = World::new("h100-vm", DEADLINE, |_| {});
    let refusal = world
        .binder
        .plan("0000:00:06.0", "vfio-pci", &nobody)
        .unwrap_err();
    assert_eq!(
        refusal.to_string(),
        "0000:00:06.0: no IOMMU group: is the IOMMU on (intel_iommu=on / amd_iommu=on on the kernel command line)?"
    );
    assert_eq!(world.driver("0000:00:06.0").as_deref(), Some("nvidia"));
}

#[test]
fn the_recorded_h100_with_the_iommu_on_moves_from_nvidia_and_back() {
    let world = World::new("h100-vm", DEADLINE, add_h100_group);
    let gpu = "0000:00:06.0";
    let plan = world.binder.plan(gpu, "vfio-pci", &nobody).unwrap();
    assert_eq!(plan.group, "5");
    assert_eq!(plan.functions[0].driver.as_deref(), Some("nvidia"));
    assert_eq!(
        (plan.functions[0].vendor, plan.functions[0].device),
        (0x10de, 0x2330)
    );
    let bound = world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(bound.nodes, ["/dev/vfio/5", "/dev/vfio/vfio"]);
    assert_eq!(world.driver(gpu).as_deref(), Some("vfio-pci"));
    assert!(world.exists("/dev/vfio/5") && world.exists("/dev/vfio/vfio"));
    let record = world.records().remove(0);
    world.binder.restore(&record, &world.journal).unwrap();
    assert_eq!(world.driver(gpu).as_deref(), Some("nvidia"));
    assert!(!world.exists("/dev/vfio/5"));
    // The kernel's word for no override.
    assert_eq!(
        world
            .read(&format!("/sys/bus/pci/devices/{gpu}/driver_override"))
            .trim(),
        ""
    );
}

/// Checks the group is as it was before a bind that failed.
fn assert_left_as_before(world: &World) {
    assert_eq!(world.driver(GPU).as_deref(), Some("nvidia"));
    assert_eq!(world.driver(AUDIO).as_deref(), Some("snd_hda_intel"));
    assert!(!world.exists("/dev/vfio/30"));
    assert!(world.records().is_empty(), "{:?}", world.records());
    for f in [GPU, AUDIO] {
        let value = world.read(&format!("/sys/bus/pci/devices/{f}/driver_override"));
        assert_eq!(value.trim(), "", "{f}");
    }
}

#[test]
fn a_driver_that_never_lets_go_fails_the_bind_and_leaves_the_group_as_it_was() {
    let world = World::vfio_host_native(Duration::from_millis(300));
    world.standin.never_lets_go(AUDIO);
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let error = world.binder.bind(CLAIM, &plan, &world.journal).unwrap_err();
    assert_eq!(
        error.to_string(),
        "0000:17:00.1 still bound to snd_hda_intel after 300ms: the driver did not let go"
    );
    assert!(matches!(error, BindError::DidNotLetGo { .. }));
    assert_left_as_before(&world);
}

#[test]
fn a_bind_that_fails_leaves_the_group_on_its_previous_drivers() {
    let world = World::vfio_host_native(Duration::from_millis(300));
    world.standin.bind_fails(AUDIO, "vfio-pci");
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let error = world.binder.bind(CLAIM, &plan, &world.journal).unwrap_err();
    assert_eq!(
        error.to_string(),
        "0000:17:00.1 not bound to vfio-pci after 300ms (unbound)"
    );
    assert_left_as_before(&world);
}

#[test]
fn a_bind_past_its_deadline_is_undone_and_a_slow_one_within_it_binds() {
    let world = World::vfio_host_native(Duration::from_millis(200));
    world
        .standin
        .bind_takes(GPU, "vfio-pci", Duration::from_secs(1));
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let error = world.binder.bind(CLAIM, &plan, &world.journal).unwrap_err();
    assert_eq!(
        error.to_string(),
        "0000:17:00.0 not bound to vfio-pci after 200ms (unbound)"
    );
    assert_left_as_before(&world);

    let world = World::vfio_host_native(Duration::from_secs(10));
    world
        .standin
        .bind_takes(GPU, "vfio-pci", Duration::from_millis(50));
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
}

#[test]
fn two_claims_racing_for_one_group_one_binds_and_the_other_is_refused_naming_it() {
    let world = Arc::new(World::vfio_host_native(DEADLINE));
    // Slow probes keep the first bind under way while the second starts.
    world
        .standin
        .bind_takes(GPU, "vfio-pci", Duration::from_millis(100));
    let barrier = Arc::new(Barrier::new(2));
    let racers: Vec<_> = ["claim-a", "claim-b"]
        .into_iter()
        .map(|claim| {
            let (world, barrier) = (world.clone(), barrier.clone());
            std::thread::spawn(move || {
                let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
                barrier.wait();
                (claim, world.binder.bind(claim, &plan, &world.journal))
            })
        })
        .collect();
    let results: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
    let winners: Vec<_> = results.iter().filter(|(_, r)| r.is_ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = winners[0].0;
    let (loser, refused) = results.iter().find(|(_, r)| r.is_err()).unwrap();
    assert_ne!(winner, *loser);
    let refused = refused.as_ref().unwrap_err().to_string();
    assert_eq!(
        refused,
        format!("0000:17:00.0 (IOMMU group 30): held by claim {winner}")
    );
    // One bind's writes, never interleaved with a second.
    assert_eq!(
        world.standin.writes().len(),
        4,
        "{:?}",
        world.standin.writes()
    );
    assert_eq!(world.records().len(), 1);
    assert_eq!(world.records()[0].claim_uid, winner);
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));

    // Later, the loser's retry is refused by the journal; its restore
    // of a record it does not hold is too.
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let error = world.binder.bind(loser, &plan, &world.journal).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with(&format!("held by claim {winner}"))
    );
    let mut theirs = world.records().remove(0);
    theirs.claim_uid = (*loser).to_owned();
    let error = world.binder.restore(&theirs, &world.journal).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with(&format!("held by claim {winner}"))
    );
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
}

/// The child's part of the SIGKILL test: binds group 30 (whose probes the
/// parent's stand-in holds) until the parent kills it. Does nothing when
/// run on its own.
#[test]
fn child_binds_until_killed() {
    let (Ok(root), Ok(journal)) = (
        std::env::var("WDP_PASSTHROUGH_CHILD_ROOT"),
        std::env::var("WDP_PASSTHROUGH_CHILD_JOURNAL"),
    ) else {
        return;
    };
    let binder = wdp_passthrough::Binder::new(
        root,
        wdp_passthrough::BindSettings {
            deadline: Duration::from_secs(60),
        },
    );
    let journal = FileJournal::open(journal).unwrap();
    let plan = binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let result = binder.bind("claim-killed", &plan, &journal);
    panic!("the bind was to be killed, but returned {result:?}");
}

#[test]
fn a_host_killed_between_unbind_and_bind_has_the_group_restored_at_its_next_start() {
    let world = World::vfio_host_native(DEADLINE);
    world.standin.hold_probes();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["child_binds_until_killed", "--exact", "--nocapture"])
        .env("WDP_PASSTHROUGH_CHILD_ROOT", &world.root)
        .env("WDP_PASSTHROUGH_CHILD_JOURNAL", world.journal_path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let in_window = world
        .standin
        .wait_until(Duration::from_secs(30), |s| !s.held_probes().is_empty());
    if !in_window {
        let _ = child.kill();
        panic!("the child never probed: {:?}", child.wait());
    }
    // Between unbind and bind: both functions unbound, the journal says Binding.
    assert_eq!(world.driver(GPU), None);
    assert_eq!(world.driver(AUDIO), None);
    child.kill().unwrap();
    child.wait().unwrap();

    // The next start: the journal as the killed host left it.
    let journal = FileJournal::open(world.journal_path()).unwrap();
    let records = journal.records().unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].phase, Phase::Binding);
    assert_eq!(records[0].claim_uid, "claim-killed");
    let outcomes = world.binder.recover(&journal);
    assert_eq!(outcomes.len(), 1);
    assert!(
        matches!(&outcomes[0], RecoveryOutcome::Undone { group, claim_uid } if group == "30" && claim_uid == "claim-killed"),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes[0].to_string(),
        "IOMMU group 30: a bind for claim claim-killed was cut short; its functions are back on their previous drivers"
    );
    assert_eq!(world.driver(GPU).as_deref(), Some("nvidia"));
    assert_eq!(world.driver(AUDIO).as_deref(), Some("snd_hda_intel"));
    assert!(journal.records().unwrap().is_empty());
    assert!(!world.exists("/dev/vfio/30"));
    // The probe the kernel was still holding changes nothing now.
    world.standin.release_probes();
    assert_eq!(world.driver(GPU).as_deref(), Some("nvidia"));
}

#[test]
fn recovery_keeps_bound_groups_and_says_whether_they_are_intact() {
    let world = World::vfio_host_native(DEADLINE);
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    world.binder.bind(CLAIM, &plan, &world.journal).unwrap();
    let outcomes = world.binder.recover(&world.journal);
    assert!(
        matches!(&outcomes[..], [RecoveryOutcome::Kept { intact: true, .. }]),
        "{outcomes:?}"
    );
    assert_eq!(world.driver(GPU).as_deref(), Some("vfio-pci"));
    // Someone moved a function away meanwhile.
    world.standin.set_driver(AUDIO, Some("snd_hda_intel"));
    let outcomes = world.binder.recover(&world.journal);
    assert_eq!(
        outcomes[0].to_string(),
        "IOMMU group 30: kept bound for claim claim-a (but not every function is on the target driver now, or its node is missing)"
    );
    assert_eq!(world.records().len(), 1);
}

#[test]
fn a_damaged_journal_is_a_clear_error_and_nothing_is_touched() {
    let world = World::vfio_host_native(DEADLINE);
    let path = world.dir.path().join("state/damaged.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\"version\": 1, \"groups\": [{\"group\": \"30\"").unwrap();
    let error = FileJournal::open(&path).unwrap_err().to_string();
    assert!(
        error.starts_with(&format!(
            "passthrough journal {} is damaged (",
            path.display()
        )),
        "{error}"
    );
    assert!(error.contains("nothing was bound or restored"), "{error}");
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\"version\": 1, \"groups\": [{\"group\": \"30\""
    );
    assert!(world.standin.writes().is_empty());
    assert_eq!(world.driver(GPU).as_deref(), Some("nvidia"));

    // A journal that is a folder, or a FIFO, is no hang either.
    let fifo = world.dir.path().join("state/fifo.json");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let error = FileJournal::open(&fifo).unwrap_err().to_string();
    assert!(error.contains("a FIFO, not a regular file"), "{error}");
}

#[test]
fn a_write_that_blocks_in_the_kernel_is_given_up_at_the_deadline_and_undone() {
    let world = World::vfio_host_native(Duration::from_millis(300));
    // A driver whose remove never returns: the unbind write blocks (a FIFO
    // nobody reads blocks its writer's open the same way).
    let unbind = world.root.join("sys/bus/pci/drivers/snd_hda_intel/unbind");
    std::fs::remove_file(&unbind).unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&unbind)
            .status()
            .unwrap()
            .success()
    );
    let plan = world.binder.plan(GPU, "vfio-pci", &nobody).unwrap();
    let error = world.binder.bind(CLAIM, &plan, &world.journal).unwrap_err();
    assert_eq!(
        error.to_string(),
        "writing \"0000:17:00.1\" to /sys/bus/pci/drivers/snd_hda_intel/unbind did not return within 300ms"
    );
    assert_left_as_before(&world);
    // Let the abandoned writer finish.
    use std::os::unix::fs::OpenOptionsExt;
    let mut reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&unbind)
        .unwrap();
    let _ = std::io::Read::read_to_end(&mut reader, &mut Vec::new());
}
