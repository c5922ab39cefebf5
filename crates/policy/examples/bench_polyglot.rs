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
use wdp_test_support::measure::percentile;
#[path = "common/request.rs"]
mod common_request;
use common_request::request;
#[path = "polyglot/differential.rs"]
mod differential;
use wdp_policy::{
    CallContext, CallLimits, DeviceRef, EngineSettings, Guest, PolicyEngine, PreferredRequest,
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

// ---- timing --------------------------------------------------------------

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

/// The command line.
struct Options {
    /// Random requests per hook in the differential check (0: none).
    cases: usize,
    bench: bool,
    host_only: bool,
    iterations: usize,
    dir: PathBuf,
}

impl Options {
    fn parse() -> Self {
        let mut args = std::env::args().skip(1);
        let mut options = Options {
            cases: 300,
            bench: true,
            host_only: false,
            iterations: 2000,
            dir: default_dir(),
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--check" => {
                    options.cases = args.next().and_then(|v| v.parse().ok()).expect("--check N")
                }
                "--no-bench" => options.bench = false,
                "--host-only" => options.host_only = true,
                "--dir" => options.dir = args.next().map(PathBuf::from).expect("--dir PATH"),
                "--iterations" => {
                    options.iterations = args
                        .next()
                        .and_then(|v| v.parse().ok())
                        .expect("--iterations N")
                }
                other => panic!(
                    "unknown argument {other}; use --check N, --iterations N, --dir PATH, --no-bench, --host-only"
                ),
            }
        }
        options
    }
}

/// One language's two guests, loaded.
struct Loaded {
    name: &'static str,
    size: u64,
    guests: (Arc<Guest>, Arc<Guest>),
    load: Duration,
    pooled: bool,
    path: PathBuf,
}

fn main() {
    let Options {
        cases,
        bench,
        host_only,
        iterations,
        dir,
    } = Options::parse();

    let pooled = engine(true);
    let on_demand = engine(false);
    println!("pooling allocator: {}", pooled.uses_pooling());
    let (loaded, missing) = load_languages(&dir, &pooled, &on_demand);

    let mut all_match = true;
    if cases > 0 && loaded.first().is_some_and(|l| l.name == "Rust") {
        all_match = differential_check(&loaded, cases);
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
        scorer_table(&loaded, &pooled, &on_demand, iterations);
    }
    if missing || !all_match {
        std::process::exit(1);
    }
}

/// Loads the guests of every language found in `dir`; true beside them
/// when one is missing or does not load.
fn load_languages(
    dir: &Path,
    pooled: &PolicyEngine,
    on_demand: &PolicyEngine,
) -> (Vec<Loaded>, bool) {
    let mut loaded = Vec::new();
    let mut missing = false;
    for lang in languages(dir) {
        let (Ok(meta), true) = (std::fs::metadata(&lang.packing), lang.health.exists()) else {
            println!(
                "  {}: {} or its health guest is missing; run `bash guests/polyglot/build.sh`",
                lang.name,
                lang.packing.display()
            );
            missing = true;
            continue;
        };
        let packing = load(pooled, on_demand, &lang.packing);
        let health = load(pooled, on_demand, &lang.health);
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
    (loaded, missing)
}

/// Checks every language after the first (Rust) against it on `cases`
/// random requests per hook; whether all answered the same.
fn differential_check(loaded: &[Loaded], cases: usize) -> bool {
    let mut all_match = true;
    println!("\ndifferential check against the Rust guests ({cases} random requests per hook):");
    for lang in &loaded[1..] {
        let started = Instant::now();
        let ok = differential::check(&loaded[0].guests, &lang.guests, lang.name, cases);
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
    all_match
}

/// Times the scorer of each language at 64 devices, each call in a fresh
/// instance, with its size, compile and load times.
fn scorer_table(
    loaded: &[Loaded],
    pooled: &PolicyEngine,
    on_demand: &PolicyEngine,
    iterations: usize,
) {
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
    for lang in loaded {
        let bytes = std::fs::read(&lang.path).expect("guest bytes");
        let engine = if lang.pooled { pooled } else { on_demand };
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
