//! Memory of the compiled-guest cache across guest edits: the resident set
//! size (RSS) of this process after 10 and after 100 distinct builds of a
//! guest, loaded the way the host loads them on a reload (compile, checks,
//! pre-link, a smoke-test call), each build replacing the previous one.
//!
//! Distinct builds are made by appending a custom section with a counter to
//! a built guest (`allocate-shaper`), so each has its own content hash and
//! is compiled anew, as an edited guest would be.
//!
//! ```sh
//! cargo run --release -p wdp-policy --example bench_cache_memory
//! cargo run --release -p wdp-policy --example bench_cache_memory -- --retain
//! ```
//!
//! `--retain` calls [`PolicyEngine::retain_compiled`] after every build, as
//! the host does after a reload, keeping only the build in use; without
//! it, only the cache's byte budget
//! ([`wdp_policy::EngineSettings::unused_cache_bytes`]) bounds the builds
//! nobody uses. `--builds N` changes the 100.

use std::sync::Arc;

use wdp_policy::{CallContext, CallLimits, EngineSettings, PolicyEngine};

/// Resident set size of this process, in KiB.
fn rss_kib() -> u64 {
    wdp_test_support::measure::rss_kib(std::process::id())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Appends a custom section named `wdp-bench-build` holding `n`.
fn distinct_build(base: &[u8], n: u32) -> Vec<u8> {
    fn leb(mut value: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if value == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"wdp-bench-build";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(&n.to_le_bytes());
    let mut bytes = base.to_vec();
    bytes.push(0); // custom section id
    leb(payload.len(), &mut bytes);
    bytes.extend_from_slice(&payload);
    bytes
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let retain = args.iter().any(|a| a == "--retain");
    let builds: u32 = args
        .iter()
        .position(|a| a == "--builds")
        .and_then(|i| args.get(i + 1))
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(100);

    let base = std::fs::read(wdp_guest_artifacts::ALLOCATE_SHAPER)?;
    let engine = PolicyEngine::new(EngineSettings::default())?;
    let ctx = CallContext::new(CallLimits::default());
    let start = rss_kib();
    println!(
        "guest allocate-shaper: {} KiB of wasm; engine (pooling: {}) created, RSS {:.1} MiB",
        base.len() / 1024,
        engine.uses_pooling(),
        mib(start)
    );
    println!(
        "mode: {}",
        if retain {
            "retain_compiled after every build (as the host after a reload)"
        } else {
            "byte budget only"
        }
    );

    let mut current: Option<Arc<wdp_policy::Guest>> = None;
    let mut at_10 = 0;
    for n in 1..=builds {
        let bytes = distinct_build(&base, n);
        let guest = engine.load_bytes("allocate-shaper.wasm", &bytes)?;
        guest.smoke_test(&ctx)?;
        if n == 1 {
            println!("compiled image: {} KiB", guest.compiled_bytes() / 1024);
        }
        // The new build replaces the old one, as a reload swaps a resource.
        current = Some(guest);
        if retain && let Some(current) = &current {
            let keep = current.content_hash().to_owned();
            engine.retain_compiled(|hash| hash == keep);
        }
        if n == 1 || n == 10 || n % 25 == 0 || n == builds {
            let rss = rss_kib();
            let stats = engine.cache_stats();
            println!(
                "after {n:>4} builds: RSS {:.1} MiB; cache: {} live, {} unused ({} KiB)",
                mib(rss),
                stats.live_entries,
                stats.unused_entries,
                stats.unused_bytes / 1024
            );
            if n == 10 {
                at_10 = rss;
            }
        }
    }
    let end = rss_kib();
    if builds >= 10 {
        println!(
            "RSS after {builds} builds minus after 10: {:+.1} MiB",
            mib(end) - mib(at_10)
        );
    }
    drop(current);
    Ok(())
}
