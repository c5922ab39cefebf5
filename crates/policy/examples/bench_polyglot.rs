//! The same policy in four languages: the NUMA / link-locality packing
//! scorer (`preferred-allocation`) and the presence/driver health rule
//! (`health`) as Rust (`guests/numa-packing`, `guests/presence-health`),
//! Python (componentize-py), JavaScript (componentize-js) and C (clang +
//! wasi-libc + wasm-tools) components, built by `guests/polyglot/build.sh`
//! into `target/polyglot/`.
//!
//! For each language it prints the component size, the compile time (a
//! fresh compile, median of a few) and the full load time (compile +
//! checks + pre-link + type-check instance), and instantiate+call p50 / p99
//! of the scorer at 64 devices on two NUMA nodes, each call in a fresh
//! instance. Then, through the host's own `GetPreferredAllocation` path
//! ([`Guest::choose_by_index`] with a device-set generation, warm instances
//! as in the host) at 8 and 1,024 devices: p50 / p99 by index, the same
//! call with the whole request lowered into a warm instance (the host's
//! cost for a guest without `preferred-allocation-indexed`, i.e. the
//! polyglot guests before they exported it), a fresh instance, and probes
//! of where the time goes (see `host_path`). Before timing, every language
//! is checked against the Rust guests on random requests (answers and
//! error messages must be identical), whole and by index (a guest without
//! `preferred-allocation-indexed` gets the whole request there too, as in
//! the host), and by index at the benchmark sizes.
//!
//! ```sh
//! bash guests/polyglot/build.sh
//! cargo run --release -p wdp-policy --example bench_polyglot            # check + bench
//! cargo run --release -p wdp-policy --example bench_polyglot -- --check 2000 --no-bench
//! ```
//!
//! `--dir PATH` reads the components from another directory, `--iterations
//! N` caps the timed calls per language (default 2000, or about 5 s),
//! `--host-only` prints only the host-path table; the environment variables
//! `WDP_BENCH_MEMORY_MIB` (memory cap of a call, default 128) and
//! `WDP_BENCH_LANG` (one language for the host-path table, e.g. `Python`)
//! narrow it. Compiled guests are kept in `target/polyglot/.bench-compiled`
//! so a second run does not compile them again.
//!
//! Guests load on an engine configured like the host's (pooling allocator);
//! a guest the pooling limits refuse is reported and then measured on an
//! on-demand engine, marked `(on-demand)`.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wdp_guest_artifacts as artifacts;
#[path = "common/request.rs"]
mod common_request;
use common_request::request;
use wdp_policy::{
    CallContext, CallError, CallLimits, Candidate, CandidateKind, Device, DeviceFacts, DeviceRef,
    EngineSettings, Guest, PolicyEngine, PreferredRequest,
};

/// Per-call cost of `GetPreferredAllocation` through the host's own path, at
/// 8 and 1,024 devices: [`Guest::choose_by_index`] with the device set's
/// generation (warm instances, the device table once per generation for a
/// guest exporting `preferred-allocation-indexed`) against the full request
/// lowered into a warm instance (what the host paid for a guest without the
/// indexed export), a fresh instance (the first call of a generation), and
/// probes of where the time goes.
fn host_path(loaded: &[(&'static str, Arc<Guest>)], iterations: usize) {
    println!(
        "\nhost path: GetPreferredAllocation (size n/4, one must-include), p50 / p99\n\n\
         by index: choose_by_index in a warm instance (the host's path; positions per call)\n\
         plain:    the whole request lowered into a warm instance (the path before the\n          \
         guest exported preferred-allocation-indexed)\n\
         fresh:    a fresh instance, whole request (first call of a device-set generation)\n\
         read:     plain, size 1: the guest only reads the request and answers the must-include\n\
         empty:    a choose of nothing, warm / fresh (call overhead / + instantiation)\n"
    );
    println!(
        "{:<11} {:>5} {:>19} {:>19} {:>19} {:>9} {:>17}  instances",
        "language", "n", "by index", "plain", "fresh", "read", "empty w / f"
    );
    let pair = |(a, b): (Duration, Duration)| format!("{} / {}", fmt_us(a), fmt_us(b));
    for (name, guest) in loaded {
        for n in [8usize, 1024] {
            let mut request = request(n);
            let table = request.available.clone();
            let refs: Vec<&DeviceRef> = table.iter().collect();
            let available: Vec<u32> = (0..n as u32).collect();
            let must = [(n / 2) as u32];
            let size = request.size;
            let mut warm = CallContext::new(limits());
            warm.generation = Some(n as u64);
            let fresh = CallContext::new(limits());
            let time = |budget: Duration, f: &mut dyn FnMut()| {
                let mut samples = measure(iterations, budget, f);
                (
                    percentile(&mut samples, 0.5),
                    percentile(&mut samples, 0.99),
                )
            };
            let before = guest.instance_stats();
            let indexed = time(Duration::from_secs(3), &mut || {
                black_box(
                    guest
                        .choose_by_index(&warm, &refs, &available, &must, size)
                        .expect("choose"),
                );
            });
            let after = guest.instance_stats();
            let plain = time(Duration::from_secs(3), &mut || {
                black_box(guest.choose(&warm, black_box(&request)).expect("choose"));
            });
            let fresh_call = time(Duration::from_secs(3), &mut || {
                black_box(guest.choose(&fresh, black_box(&request)).expect("choose"));
            });
            request.size = 1;
            let read = time(Duration::from_secs(2), &mut || {
                black_box(guest.choose(&warm, black_box(&request)).expect("choose"));
            });
            let empty = PreferredRequest::default();
            let empty_warm = time(Duration::from_secs(1), &mut || {
                black_box(guest.choose(&warm, &empty).expect("empty"));
            });
            let empty_fresh = time(Duration::from_secs(1), &mut || {
                black_box(guest.choose(&fresh, &empty).expect("empty"));
            });
            println!(
                "{:<11} {:>5} {:>19} {:>19} {:>19} {:>9} {:>17}  {} new / {} warm",
                name,
                n,
                pair(indexed),
                pair(plain),
                pair(fresh_call),
                fmt_us(read.0),
                format!("{} / {}", fmt_us(empty_warm.0), fmt_us(empty_fresh.0)),
                after.instantiated - before.instantiated,
                after.reused - before.reused,
            );
        }
    }
    println!(
        "\ninstances: of the by-index calls (warm-up included), how many instantiated \
         the guest and how many ran warm"
    );
}

/// Where `guests/polyglot/build.sh` puts the components.
fn default_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/polyglot")
}

struct Lang {
    name: &'static str,
    packing: PathBuf,
    health: PathBuf,
}

fn languages(dir: &Path) -> Vec<Lang> {
    let mut langs = vec![Lang {
        name: "Rust",
        packing: PathBuf::from(artifacts::NUMA_PACKING),
        health: PathBuf::from(artifacts::PRESENCE_HEALTH),
    }];
    for (name, prefix) in [("Python", "python"), ("JavaScript", "js"), ("C", "c")] {
        langs.push(Lang {
            name,
            packing: dir.join(format!("{prefix}-packing.wasm")),
            health: dir.join(format!("{prefix}-health.wasm")),
        });
    }
    langs
}

/// The host's engine settings, or on-demand instance allocation.
fn engine(pooling: bool) -> PolicyEngine {
    PolicyEngine::new(EngineSettings {
        pooling,
        precompiled_cache_dir: Some(default_dir().join(".bench-compiled")),
        load_limits: limits(),
        ..EngineSettings::default()
    })
    .expect("engine")
}

/// Call limits: 5 s and `WDP_BENCH_MEMORY_MIB` (default 128) MiB.
fn limits() -> CallLimits {
    let mib: u64 = std::env::var("WDP_BENCH_MEMORY_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(128);
    CallLimits {
        timeout: Duration::from_secs(5),
        memory_bytes: mib * 1024 * 1024,
    }
}

/// Loads a guest on the pooled engine, else (reporting why) on demand.
fn load(
    pooled: &PolicyEngine,
    on_demand: &PolicyEngine,
    path: &Path,
) -> Result<(Arc<Guest>, Duration, bool), String> {
    let started = Instant::now();
    match pooled.load_file(path) {
        Ok(guest) => Ok((guest, started.elapsed(), true)),
        Err(pooled_error) => {
            let started = Instant::now();
            match on_demand.load_file(path) {
                Ok(guest) => {
                    println!(
                        "  note: {}: refused by the pooled engine: {pooled_error}",
                        path.display()
                    );
                    Ok((guest, started.elapsed(), false))
                }
                Err(error) => Err(format!("{error}")),
            }
        }
    }
}

// ---- differential check against the Rust guests -------------------------

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

fn check(
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

// ---- timing --------------------------------------------------------------

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[index]
}

/// Calls `f` for about `budget` (at least 50, at most `max` times) after a
/// short warm-up.
fn measure(max: usize, budget: Duration, mut f: impl FnMut()) -> Vec<Duration> {
    let warm = Instant::now();
    for _ in 0..max.div_ceil(20) {
        f();
        if warm.elapsed() > budget / 10 {
            break;
        }
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < max && (samples.len() < 50 || started.elapsed() < budget) {
        let call = Instant::now();
        f();
        samples.push(call.elapsed());
    }
    samples
}

fn fmt_us(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 10_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cases = 300;
    let mut bench = true;
    let mut host_only = false;
    let mut iterations = 2000;
    let mut dir = default_dir();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => cases = args.next().and_then(|v| v.parse().ok()).expect("--check N"),
            "--no-bench" => bench = false,
            "--host-only" => host_only = true,
            "--dir" => dir = args.next().map(PathBuf::from).expect("--dir PATH"),
            "--iterations" => {
                iterations = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--iterations N")
            }
            other => panic!(
                "unknown argument {other}; use --check N, --iterations N, --dir PATH, --no-bench, --host-only"
            ),
        }
    }

    let pooled = engine(true);
    let on_demand = engine(false);
    println!("pooling allocator: {}", pooled.uses_pooling());

    struct Loaded {
        name: &'static str,
        size: u64,
        guests: (Arc<Guest>, Arc<Guest>),
        load: Duration,
        pooled: bool,
        path: PathBuf,
    }
    let mut loaded = Vec::new();
    let mut missing = false;
    for lang in languages(&dir) {
        let (Ok(meta), true) = (std::fs::metadata(&lang.packing), lang.health.exists()) else {
            println!(
                "  {}: {} or its health guest is missing; run `bash guests/polyglot/build.sh`",
                lang.name,
                lang.packing.display()
            );
            missing = true;
            continue;
        };
        let packing = load(&pooled, &on_demand, &lang.packing);
        let health = load(&pooled, &on_demand, &lang.health);
        match (packing, health) {
            (Ok((packing, load, pooled)), Ok((health, _, _))) => loaded.push(Loaded {
                name: lang.name,
                size: meta.len(),
                guests: (packing, health),
                load,
                pooled,
                path: lang.packing.clone(),
            }),
            (Err(e), _) | (_, Err(e)) => {
                println!("  {}: cannot load: {e}", lang.name);
                missing = true;
            }
        }
    }

    let mut all_match = true;
    if cases > 0 && loaded.first().is_some_and(|l| l.name == "Rust") {
        println!(
            "\ndifferential check against the Rust guests ({cases} random requests per hook):"
        );
        for lang in &loaded[1..] {
            let started = Instant::now();
            let ok = check(&loaded[0].guests, &lang.guests, lang.name, cases);
            all_match &= ok;
            println!(
                "  {:<10} {} ({:.1} s; {})",
                lang.name,
                if ok { "identical answers" } else { "MISMATCH" },
                started.elapsed().as_secs_f64(),
                if lang.guests.0.chooses_by_index() {
                    "whole request and by index"
                } else {
                    "whole request only: no preferred-allocation-indexed"
                }
            );
        }
    }

    if host_only || bench {
        let only = std::env::var("WDP_BENCH_LANG").ok();
        let guests: Vec<_> = loaded
            .iter()
            .filter(|l| only.as_deref().is_none_or(|o| o == l.name))
            .map(|l| (l.name, Arc::clone(&l.guests.0)))
            .collect();
        host_path(&guests, iterations);
        if host_only {
            if missing || !all_match {
                std::process::exit(1);
            }
            return;
        }
    }
    if bench {
        let ctx = CallContext::new(limits());
        let request = request(64);
        println!(
            "\nscorer (preferred-allocation) at 64 devices, 2 NUMA nodes, size 16, one must-include;\n\
             every call instantiates the guest afresh (as the host does)\n"
        );
        println!(
            "{:<12} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}",
            "language", "size", "compile", "load", "empty p50", "call p50", "call p99"
        );
        for lang in &loaded {
            let bytes = std::fs::read(&lang.path).expect("guest bytes");
            let engine = if lang.pooled { &pooled } else { &on_demand };
            let compile_runs = if bytes.len() > 1 << 20 { 3 } else { 5 };
            let mut compile: Vec<Duration> = (0..compile_runs)
                .map(|_| {
                    let started = Instant::now();
                    engine.compile_only(&bytes).expect("compiles");
                    started.elapsed()
                })
                .collect();
            let guest = &lang.guests.0;
            let mut empty = measure(iterations, Duration::from_secs(3), || {
                black_box(
                    guest
                        .choose(&ctx, &PreferredRequest::default())
                        .expect("empty"),
                );
            });
            let mut calls = measure(iterations, Duration::from_secs(5), || {
                black_box(guest.choose(&ctx, black_box(&request)).expect("choose"));
            });
            println!(
                "{:<12} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11}{}",
                lang.name,
                format!("{} KiB", lang.size.div_ceil(1024)),
                format!(
                    "{:.0} ms",
                    percentile(&mut compile, 0.5).as_secs_f64() * 1e3
                ),
                format!("{:.0} ms", lang.load.as_secs_f64() * 1e3),
                fmt_us(percentile(&mut empty, 0.5)),
                fmt_us(percentile(&mut calls, 0.5)),
                fmt_us(percentile(&mut calls, 0.99)),
                if lang.pooled { "" } else { "  (on-demand)" }
            );
        }
        println!(
            "\ncompile: fresh compile (median); load: first load_file (compile + export/import \
             checks + pre-link + type-check instance);\nempty: instantiate + choose of nothing; \
             call: instantiate + choose at 64 devices ({} samples max)",
            iterations
        );
    }
    if missing || !all_match {
        std::process::exit(1);
    }
}
