//! The differential check of `bench_polyglot`: a language's guests
//! against the Rust guests on random requests (answers and error messages
//! must be identical), whole and by index, and by index at the benchmark
//! sizes.

use std::sync::Arc;

use wdp_policy::{
    CallContext, CallError, Candidate, CandidateKind, Device, DeviceFacts, DeviceRef, Guest,
    PreferredRequest,
};

use super::limits;
use crate::common_request::request;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// IDs mixing ASCII, Latin-1, private-use and astral characters: their
/// order differs between UTF-16 code units and code points.
const IDS: &[&str] = &[
    "0000:3b:00.0",
    "0000:3c:00.0",
    "0000:86:00.0",
    "0000:af:00.0",
    "a",
    "b",
    "B",
    "é1",
    "\u{e000}x",
    "\u{1f600}",
    "dev-10",
    "dev-9",
    "a\"q",
    "tab\there",
];
const GROUPS: &[&str] = &["", "nvlink-0", "nvlink-1", "sw", "\u{ff21}"];
const PATHS: &[&str] = &[
    "",
    "/",
    "x",
    "/x",
    "//x",
    "a/b//",
    "/sys/a/b",
    "/sys/a/b/",
    "/sys/a/c/d",
    "/sys/a/b/c",
    "/sys/devices/pci0000:00/0000:00:01.0/0000:3b:00.0",
];

/// A request as the host sends it by index: a device table in ID order
/// (each available ID once, with its first occurrence's facts, and each
/// must-include ID that is not available, without facts, so it is in the
/// table but not available), the available and must-include positions.
fn as_indexed(request: &PreferredRequest) -> (Vec<DeviceRef>, Vec<u32>, Vec<u32>) {
    let mut table: Vec<DeviceRef> = Vec::new();
    for device in &request.available {
        if !table.iter().any(|d| d.id == device.id) {
            table.push(device.clone());
        }
    }
    for id in &request.must_include {
        if !table.iter().any(|d| &d.id == id) {
            table.push(DeviceRef {
                id: id.clone(),
                device_id: id.clone(),
                numa_nodes: Vec::new(),
                attributes: Vec::new(),
                nodes: Vec::new(),
            });
        }
    }
    table.sort_by(|a, b| a.id.cmp(&b.id));
    let position = |id: &str| table.iter().position(|d| d.id == id).expect("in table") as u32;
    let available = request.available.iter().map(|d| position(&d.id)).collect();
    let must = request.must_include.iter().map(|id| position(id)).collect();
    (table, available, must)
}

fn random_request(rng: &mut Rng) -> PreferredRequest {
    let n = rng.below(13);
    let available: Vec<DeviceRef> = (0..n)
        .map(|_| {
            let id = rng.pick(IDS).to_string();
            let numa_nodes = (0..rng.below(3))
                .map(|_| [-1i64, 0, 1, 2, 3][rng.below(5)])
                .collect();
            let mut attributes = Vec::new();
            for _ in 0..rng.below(4) {
                match rng.below(4) {
                    0 => attributes.push(("link.group".to_string(), rng.pick(GROUPS).to_string())),
                    1 | 2 => attributes.push(("pci.path".to_string(), rng.pick(PATHS).to_string())),
                    _ => attributes.push(("pci.vendor".to_string(), "0x10de".to_string())),
                }
            }
            DeviceRef {
                device_id: id.clone(),
                id,
                numa_nodes,
                attributes,
                nodes: Vec::new(),
            }
        })
        .collect();
    let mut must_include = Vec::new();
    for _ in 0..rng.below(4) {
        if !available.is_empty() && !rng.chance(10) {
            must_include.push(available[rng.below(available.len())].id.clone());
        } else {
            must_include.push(rng.pick(&["zz", "a\"\n\u{7f}\u{1}"]).to_string());
        }
    }
    let size = rng.below(n + 2) as u32;
    PreferredRequest {
        available,
        must_include,
        size,
    }
}

const CONFIGS: &[Option<&str>] = &[
    None,
    Some(""),
    Some("nvidia"),
    Some(" nvidia , vfio-pci,"),
    Some("[\"nvidia\", 'i915']"),
    Some("\u{a0}nvidia\u{3000},\u{85}i915\u{2009}"),
    Some("["),
    Some(",, ,"),
    Some("'\"vfio-pci\"'"),
];
const DRIVERS: &[&str] = &["", "nvidia", "vfio-pci", "i915"];

fn random_health(rng: &mut Rng) -> (Vec<DeviceFacts>, Vec<(String, String)>) {
    let pool = ["c0", "c1", "c2", "c3", "0000:3b:00.0"];
    let devices = (0..rng.below(5))
        .map(|d| {
            let candidate_ids: Vec<String> = (0..rng.below(4))
                .map(|_| pool[rng.below(pool.len())].to_string())
                .collect();
            let present: Vec<&str> = pool.iter().copied().filter(|_| rng.chance(70)).collect();
            let candidates = present
                .into_iter()
                .map(|id| {
                    let mut attributes = Vec::new();
                    for _ in 0..rng.below(3) {
                        if rng.chance(70) {
                            attributes
                                .push(("pci.driver".to_string(), rng.pick(DRIVERS).to_string()));
                        } else {
                            attributes.push(("pci.vendor".to_string(), "0x10de".to_string()));
                        }
                    }
                    Candidate {
                        id: id.to_string(),
                        kind: [
                            CandidateKind::Pci,
                            CandidateKind::Pci,
                            CandidateKind::Usb,
                            CandidateKind::Node,
                        ][rng.below(4)],
                        present: rng.chance(80),
                        numa_nodes: vec![0],
                        attributes,
                        nodes: Vec::new(),
                    }
                })
                .collect();
            DeviceFacts {
                device: Device {
                    id: format!("gpu{d}"),
                    candidates: candidate_ids,
                    numa_nodes: vec![0],
                    attributes: Vec::new(),
                    replicas: 0,
                },
                candidates,
            }
        })
        .collect();
    let mut config = vec![("vendors".to_string(), "0x10de".to_string())];
    if let Some(value) = CONFIGS[rng.below(CONFIGS.len())] {
        config.push(("drivers".to_string(), value.to_string()));
        if rng.chance(30) {
            config.push(("drivers".to_string(), "ignored-second".to_string()));
        }
    }
    (devices, config)
}

/// An answer reduced to what must match: the value, or the guest's message.
fn outcome<T: std::fmt::Debug>(result: Result<T, CallError>) -> Result<T, String> {
    result.map_err(|error| match error {
        CallError::GuestError { message, .. } => message,
        other => format!("<not a guest error> {other}"),
    })
}

/// Compares guest pair `other` (packing, health) of language `name` with
/// the Rust pair `rust` on `cases` random requests per hook, whole and by
/// index, and on the benchmark requests; prints the first mismatches and
/// says whether there was none.
pub fn check(
    rust: &(Arc<Guest>, Arc<Guest>),
    other: &(Arc<Guest>, Arc<Guest>),
    name: &str,
    cases: usize,
) -> bool {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let ctx = CallContext::new(limits());
    let mut failures = 0;
    for case in 0..cases {
        let request = random_request(&mut rng);
        let want = outcome(rust.0.choose(&ctx, &request));
        let got = outcome(other.0.choose(&ctx, &request));
        if want != got && failures < 5 {
            failures += 1;
            println!(
                "  MISMATCH {name} packing case {case}: rust {want:?}, {name} {got:?}\n    request {request:?}"
            );
        }
        // The same request by index (warm instances, a table per case):
        // both guests must answer what the Rust guest answers whole.
        let (table, available, must) = as_indexed(&request);
        let refs: Vec<&DeviceRef> = table.iter().collect();
        let mut by_index = CallContext::new(limits());
        by_index.generation = Some(10_000_000 + case as u64);
        let answer = |guest: &Guest| {
            outcome(guest.choose_by_index(&by_index, &refs, &available, &must, request.size))
                .and_then(|a| a.into_ids(&refs))
        };
        for (who, got) in [("rust", answer(&rust.0)), (name, answer(&other.0))] {
            if want != got && failures < 5 {
                failures += 1;
                println!(
                    "  MISMATCH {name} packing by index case {case}: rust (whole) {want:?}, {who} {got:?}\n    request {request:?}"
                );
            }
        }
        let (devices, config) = random_health(&mut rng);
        let mut ctx = CallContext::new(limits());
        ctx.config = Arc::new(config);
        let want = outcome(rust.1.check_health(&ctx, &devices));
        let got = outcome(other.1.check_health(&ctx, &devices));
        if want != got && failures < 5 {
            failures += 1;
            println!(
                "  MISMATCH {name} health case {case}: rust {want:?}, {name} {got:?}\n    devices {devices:?}\n    config {:?}",
                ctx.config
            );
        }
    }
    // The benchmark requests, which are bigger, whole and by index.
    for n in [8, 64, 1024] {
        let request = request(n);
        let want = outcome(rust.0.choose(&ctx, &request));
        let got = outcome(other.0.choose(&ctx, &request));
        if want != got {
            failures += 1;
            println!("  MISMATCH {name} packing at {n} devices: rust {want:?}, {name} {got:?}");
        }
        let refs: Vec<&DeviceRef> = request.available.iter().collect();
        let mut by_index = CallContext::new(limits());
        by_index.generation = Some(1_000_000 + n as u64);
        let available: Vec<u32> = (0..n as u32).step_by(3).collect();
        let must = [available[available.len() / 2]];
        let size = (available.len() / 3) as u32;
        let answer = |guest: &Guest| {
            guest
                .choose_by_index(&by_index, &refs, &available, &must, size)
                .map_err(|e| e.to_string())
                .and_then(|a| a.into_ids(&refs))
        };
        let (want, got) = (answer(&rust.0), answer(&other.0));
        if want != got {
            failures += 1;
            println!(
                "  MISMATCH {name} packing by index at {n} devices: rust {want:?}, {name} {got:?}"
            );
        }
    }
    failures == 0
}
