//! The SR-IOV DRA example guest in Python, JavaScript and C
//! (`guests/polyglot/python/sriov`, `js/sriov.js`, `c/sriov.c`, built by
//! `guests/polyglot/build.sh` into `target/polyglot/`), loaded through the
//! host library (`wdp-policy`) with its `hardware` imports served by
//! `wdp-hardware` over a copy of the `sriov-nic` fixture, as the host
//! serves them: every language must describe the same layout of the
//! fixture's two PFs (checked against the layout written out here), create
//! and remove VFs only through the granted attributes, and report the same
//! status.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wdp_hardware::{HostRoot, PciSelector, Selector};
use wdp_policy::types::{
    ClaimDevice, Counter, CounterConsumption, CounterSet, DeviceCondition, DeviceLayout,
    DeviceStatus, Layout, NetworkData, Partition,
};
use wdp_policy::{
    CallContext, CallError, CallLimits, Candidate, CandidateKind, Device, EngineSettings, Guest,
    HostServices, PolicyEngine,
};

use crate::support::{World, run_to_end};

const PF0: &str = "0000:3b:00.0";
const PF1: &str = "0000:3b:00.1";
const PF_DIR: &str = "sys/devices/pci0000:3a/0000:3a:00.0";
const GRANTED: [&str; 2] = ["sriov_vf_enable", "sriov_vf_disable"];

/// The components built by `guests/polyglot/build.sh`; fails (never skips)
/// when one is missing.
fn guests() -> Vec<(&'static str, PathBuf)> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/polyglot"
    ));
    ["python", "js", "c"]
        .into_iter()
        .map(|lang| {
            let path = dir.join(format!("{lang}-sriov.wasm"));
            assert!(
                path.is_file(),
                "{} is missing: build the polyglot guests first with \
                 `bash guests/polyglot/build.sh` (then run `cargo test` again)",
                path.display()
            );
            (lang, path)
        })
        .collect()
}

/// Every language's guest, loaded once for all the tests of this file
/// (compiling the Python and JavaScript components takes seconds; the
/// compiled code is kept in `target/polyglot/.e2e-compiled` between runs).
fn loaded() -> &'static [(&'static str, Arc<Guest>)] {
    static LOADED: std::sync::OnceLock<Vec<(&'static str, Arc<Guest>)>> =
        std::sync::OnceLock::new();
    LOADED.get_or_init(|| {
        let engine = PolicyEngine::new(EngineSettings {
            precompiled_cache_dir: Some(
                concat!(
                    env!("CARGO_MANIFEST_DIR"),
                    "/../../target/polyglot/.e2e-compiled"
                )
                .into(),
            ),
            load_limits: limits(),
            ..EngineSettings::default()
        })
        .unwrap();
        // The engine's ticker must outlive the guests.
        let engine = Box::leak(Box::new(engine));
        guests()
            .into_iter()
            .map(|(lang, path)| {
                let guest = engine
                    .load_file(&path)
                    .unwrap_or_else(|e| panic!("{lang}: {e}"));
                (lang, guest)
            })
            .collect()
    })
}

fn limits() -> CallLimits {
    CallLimits {
        timeout: Duration::from_secs(10),
        memory_bytes: 128 * 1024 * 1024,
    }
}

/// The `hardware` imports over a fixture tree, as the host serves them
/// (the resource's candidates, confined reads, writes of granted names
/// only), with every write that went through recorded.
struct Fixture {
    world: World,
    root: HostRoot,
    candidates: Vec<wdp_hardware::Candidate>,
    granted: Vec<String>,
    writes: Mutex<Vec<(String, String, String)>>,
}

impl Fixture {
    /// A copy of `sriov-nic` whose resource selects the two PFs (ConnectX-6
    /// Dx `15b3:101d`), with `granted` attributes writable.
    fn new(granted: &[&str]) -> Self {
        let world = World::from_fixture("sriov-nic");
        let root = HostRoot::new(world.root());
        let selector = Selector::Pci(PciSelector {
            vendor: Some("0x15b3".into()),
            device: Some("0x101d".into()),
            ..PciSelector::default()
        });
        let candidates = wdp_hardware::discover(&root, &[selector])
            .unwrap()
            .candidates;
        let ids: Vec<&str> = candidates.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, [PF0, PF1]);
        Self {
            world,
            root,
            candidates,
            granted: granted.iter().map(|g| g.to_string()).collect(),
            writes: Mutex::default(),
        }
    }

    /// The devices the built-in discovery advertises: one per PF, its
    /// PCI address as ID.
    fn devices(&self) -> Vec<Device> {
        self.candidates
            .iter()
            .map(|c| Device {
                id: c.id.clone(),
                candidates: vec![c.id.clone()],
                numa_nodes: c.numa_nodes.clone(),
                attributes: attributes(c),
                replicas: 1,
            })
            .collect()
    }

    /// The content of a PF's attribute file in the copy.
    fn file(&self, pf: &str, name: &str) -> String {
        std::fs::read_to_string(self.world.root().join(PF_DIR).join(pf).join(name)).unwrap()
    }

    fn find(&self, id: &str) -> Result<&wdp_hardware::Candidate, String> {
        self.candidates
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("candidate {id:?} is not selected by this resource"))
    }

    fn writes(&self) -> Vec<(String, String, String)> {
        std::mem::take(&mut self.writes.lock().unwrap())
    }
}

fn attributes(c: &wdp_hardware::Candidate) -> Vec<(String, String)> {
    c.attributes
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl HostServices for Fixture {
    fn candidates(&self) -> Vec<Candidate> {
        self.candidates
            .iter()
            .map(|c| Candidate {
                id: c.id.clone(),
                kind: CandidateKind::Pci,
                present: c
                    .sysfs_dir
                    .as_ref()
                    .is_some_and(|d| self.root.resolve(d).exists()),
                numa_nodes: c.numa_nodes.clone(),
                attributes: attributes(c),
                nodes: Vec::new(),
            })
            .collect()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        wdp_hardware::read_attribute(&self.root, self.find(candidate_id)?, name)
            .map_err(|e| e.to_string())
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String> {
        let candidate = self.find(candidate_id)?;
        wdp_hardware::write_attribute(&self.root, candidate, name, value, &self.granted)
            .map_err(|e| e.to_string())?;
        self.writes
            .lock()
            .unwrap()
            .push((candidate_id.into(), name.into(), value.into()));
        Ok(())
    }
}

/// A fresh-instance call context over `fixture` with `[guest-config]`
/// `config`.
fn context(fixture: &Arc<Fixture>, config: &[(&str, &str)]) -> CallContext {
    let mut ctx = CallContext::new(limits());
    ctx.services = fixture.clone();
    ctx.config = Arc::new(
        config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    ctx.resource = "example.com/sriov-pf".into();
    ctx
}

fn counters(vfs: u32, queue_pairs: u32) -> Vec<Counter> {
    vec![
        Counter {
            name: "vfs".into(),
            value: vfs.to_string(),
        },
        Counter {
            name: "queue-pairs".into(),
            value: queue_pairs.to_string(),
        },
    ]
}

/// The layout the guest's rules give PFs of `vfs` VFs each, sharing
/// `queue_pairs` queue pairs.
fn expected_layout(pfs: &[(&str, u32)], queue_pairs: u32) -> Layout {
    let mut layout = Layout::default();
    for (n, &(pf, vfs)) in pfs.iter().enumerate() {
        let set = format!("pf-{n}");
        let consumes = |vfs, queue_pairs| {
            vec![CounterConsumption {
                counter_set: set.clone(),
                counters: counters(vfs, queue_pairs),
            }]
        };
        layout.counter_sets.push(CounterSet {
            name: set.clone(),
            counters: counters(vfs, queue_pairs),
        });
        layout.devices.push(DeviceLayout {
            id: pf.into(),
            consumes_counters: consumes(vfs, queue_pairs),
            capacity: Vec::new(),
            allow_multiple_allocations: false,
        });
        for i in 0..vfs {
            layout.partitions.push(Partition {
                id: format!("pf-{n}-vf-{i}"),
                parent: pf.into(),
                attributes: vec![
                    ("vf-index".into(), i.to_string()),
                    ("pf-address".into(), pf.into()),
                ],
                consumes_counters: consumes(1, queue_pairs / vfs),
                capacity: Vec::new(),
            });
        }
    }
    layout
}

fn guest_error(result: Result<impl std::fmt::Debug, CallError>) -> String {
    match result {
        Err(CallError::GuestError { message, .. }) => message,
        other => panic!("expected the guest's error, got {other:?}"),
    }
}

#[test]
fn every_language_describes_the_same_layout() {
    let fixture = Arc::new(Fixture::new(&[]));
    let devices = fixture.devices();
    // Both PFs: sriov_totalvfs 8, the default 64 queue pairs, 8 per VF.
    let want = expected_layout(&[(PF0, 8), (PF1, 8)], 64);
    assert_eq!(want.partitions.len(), 16);
    for (lang, guest) in loaded() {
        let got = guest
            .describe_layout(&context(&fixture, &[]), &devices)
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(got, want, "{lang}");
    }

    // Queue pairs from the config; a PF without a readable sriov_totalvfs
    // falls back to the config's `vfs`.
    std::fs::remove_file(
        fixture
            .world
            .root()
            .join(PF_DIR)
            .join(PF1)
            .join("sriov_totalvfs"),
    )
    .unwrap();
    let config = [("queue-pairs", "48"), ("vfs", "3")];
    let want = expected_layout(&[(PF0, 8), (PF1, 3)], 48);
    assert_eq!(
        want.partitions[8].consumes_counters[0].counters[1].value,
        "16"
    );
    for (lang, guest) in loaded() {
        let got = guest
            .describe_layout(&context(&fixture, &config), &devices)
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(got, want, "{lang}");
    }

    // A setting that is not a number: the same refusal everywhere.
    for (lang, guest) in loaded() {
        let ctx = context(&fixture, &[("queue-pairs", " lots ")]);
        assert_eq!(
            guest_error(guest.describe_layout(&ctx, &devices)),
            "guest-config key `queue-pairs`: expected a whole number, got \"lots\"",
            "{lang}"
        );
    }
}

fn claim_device(id: &str, device_id: &str, partition: bool) -> ClaimDevice {
    ClaimDevice {
        id: id.into(),
        device_id: device_id.into(),
        partition,
        request: "vf".into(),
        ..ClaimDevice::default()
    }
}

#[test]
fn prepare_creates_the_vf_through_the_grant_and_reports_it() {
    // A VF of PF 0, and PF 1 whole (nothing to create for it).
    let claim = [
        claim_device("pf-0-vf-3", PF0, true),
        claim_device(PF1, PF1, false),
    ];
    let want = vec![DeviceStatus {
        id: "pf-0-vf-3".into(),
        conditions: vec![DeviceCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "VfReady".into(),
            message: format!("VF 3 of {PF0} is ready"),
        }],
        data: None,
        network: Some(NetworkData {
            interface_name: "ens1f0np0v3".into(),
            ips: Vec::new(),
            hardware_address: String::new(),
        }),
    }];
    let write = |name: &str, value: &str| (PF0.to_string(), name.to_string(), value.to_string());
    for (lang, guest) in loaded() {
        let fixture = Arc::new(Fixture::new(&GRANTED));
        let ctx = context(&fixture, &[]);
        let got = guest
            .dra_prepare(&ctx, &claim)
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(got, want, "{lang}");
        assert_eq!(fixture.writes(), [write("sriov_vf_enable", "3")], "{lang}");
        assert_eq!(fixture.file(PF0, "sriov_vf_enable"), "3", "{lang}");

        guest
            .dra_unprepare(&ctx, &claim)
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(
            fixture.writes(),
            [write("sriov_vf_disable", "-3")],
            "{lang}"
        );
        assert_eq!(fixture.file(PF0, "sriov_vf_disable"), "-3", "{lang}");

        // Other attribute names from the config, granted as well.
        let fixture = Arc::new(Fixture::new(&["sriov_numvfs"]));
        let ctx = context(
            &fixture,
            &[
                ("create-attribute", "sriov_numvfs"),
                ("remove-attribute", "sriov_numvfs"),
            ],
        );
        guest
            .dra_prepare(&ctx, &claim[..1])
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        guest
            .dra_unprepare(&ctx, &claim[..1])
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(
            fixture.writes(),
            [write("sriov_numvfs", "3"), write("sriov_numvfs", "-3")],
            "{lang}"
        );
    }
}

#[test]
fn without_the_grant_prepare_fails_and_writes_nothing() {
    let claim = [claim_device("pf-1-vf-0", PF1, true)];
    let mut messages = Vec::new();
    for (lang, guest) in loaded() {
        let fixture = Arc::new(Fixture::new(&[]));
        let ctx = context(&fixture, &[]);
        // The host's refusal, passed on with the VF and the PF.
        let refused = fixture
            .write_attribute(PF1, "sriov_vf_enable", "0")
            .unwrap_err();
        let message = guest_error(guest.dra_prepare(&ctx, &claim));
        assert_eq!(
            message,
            format!("pf-1-vf-0: cannot create VF 0 of {PF1}: {refused}"),
            "{lang}"
        );
        assert!(fixture.writes().is_empty(), "{lang}");
        assert_eq!(fixture.file(PF1, "sriov_vf_enable"), "", "{lang}");
        // Undoing it fails too: the VF may exist.
        let unprepared = guest_error(guest.dra_unprepare(&ctx, &claim));
        assert!(
            unprepared.starts_with(&format!("pf-1-vf-0: cannot remove VF 0 of {PF1}: ")),
            "{lang}: {unprepared}"
        );
        messages.push((message, unprepared));
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "{messages:#?}");
}

#[test]
fn unprepare_succeeds_when_nothing_exists() {
    for (lang, guest) in loaded() {
        let fixture = Arc::new(Fixture::new(&GRANTED));
        let ctx = context(&fixture, &[]);
        // A PF that is gone took its VFs with it; a whole PF has none of
        // this guest's; an ID this guest never made is not its VF.
        std::fs::remove_dir_all(fixture.world.root().join(PF_DIR).join(PF1)).unwrap();
        let claim = [
            claim_device("pf-1-vf-2", PF1, true),
            claim_device(PF0, PF0, false),
            claim_device("pf-0-gpu-1", PF0, true),
        ];
        guest
            .dra_unprepare(&ctx, &claim)
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert!(fixture.writes().is_empty(), "{lang}");
        assert_eq!(
            guest.dra_prepare(&ctx, &claim[1..]).unwrap(),
            [],
            "{lang}: nothing to create"
        );
        // A VF that was never created: its removal is written (the
        // attribute ignores it) and succeeds.
        guest
            .dra_unprepare(&ctx, &[claim_device("pf-0-vf-7", PF0, true)])
            .unwrap_or_else(|e| panic!("{lang}: {e}"));
        assert_eq!(
            fixture.writes(),
            [(
                PF0.to_string(),
                "sriov_vf_disable".to_string(),
                "-7".to_string()
            )],
            "{lang}"
        );
    }
}

/// The recipe as shipped (`config/examples/sriov-dra`, naming the C guest
/// in `config/guests/`) passes `check` on the fixture, which prints the
/// layout the guest describes.
#[test]
fn the_sriov_dra_recipe_publishes_the_vfs_as_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let recipe = config.join("examples/sriov-dra");
    std::fs::create_dir_all(&recipe).unwrap();
    std::fs::create_dir_all(config.join("guests")).unwrap();
    let (_, c) = guests().pop().unwrap();
    std::fs::copy(c, config.join("guests/c-sriov.wasm")).unwrap();
    let repo = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    for entry in std::fs::read_dir(repo.join("config/examples/sriov-dra")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), recipe.join(entry.file_name())).unwrap();
    }
    let fixture = repo.join("tests/fixtures/sriov-nic");
    let (code, out, err) = run_to_end(&[
        "check",
        "--config-dir",
        recipe.to_str().unwrap(),
        "--host-root",
        fixture.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "counter set pf-0: queue-pairs=64 vfs=8",
        "counter set pf-1: queue-pairs=64 vfs=8",
        "device 0000-3a3b-3a00-2e0: consumes queue-pairs=64 vfs=8 from pf-0",
        "device pf-1-vf-7: partition of 0000-3a3b-3a00-2e1; consumes queue-pairs=8 vfs=1 from pf-1",
        "2 devices (2 healthy)",
    ] {
        assert!(out.contains(line), "{line:?} missing from:\n{out}");
    }
    assert_eq!(out.matches(": partition of ").count(), 16, "{out}");
}
