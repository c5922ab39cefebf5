//! Where the time of a small guest call goes, in process: one warm
//! `allocate` call of the shipped `allocate-shaper` (one device) and one
//! warm by-index `preferred-allocation` call of `numa-packing` (8 of N),
//! timed three ways over many rounds (p50 and p99, µs):
//!
//! - **on this thread**: the guest call alone (warm instance, lowering,
//!   lifting), no thread hand-off;
//! - **spawn_blocking**: the same call handed to tokio's blocking pool and
//!   awaited from a worker, as the host did for every call;
//! - **block_in_place**: the same call run on the awaiting worker after it
//!   hands its other tasks to another thread, as the host now does for a
//!   guest that cannot block in a host import.
//!
//! ```text
//! cargo run --release -p wdp-policy --example small_call_time [N] [ROUNDS]
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use wdp_guest_artifacts as artifacts;
#[path = "common/request.rs"]
mod common_request;
use common_request::request;
use wdp_policy::{
    CallContext, CallLimits, ContainerResponse, DeviceRef, EngineSettings, Guest, PolicyEngine,
};

/// One call of a guest, repeatable from any thread.
type Call = Arc<dyn Fn() + Send + Sync>;

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    (at(0.5).as_secs_f64() * 1e6, at(0.99).as_secs_f64() * 1e6)
}

fn time_here(call: &Call, rounds: usize) -> (f64, f64) {
    let samples = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            call();
            started.elapsed()
        })
        .collect();
    percentiles(samples)
}

async fn time_spawn_blocking(call: &Call, rounds: usize) -> (f64, f64) {
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let call = Arc::clone(call);
        let started = Instant::now();
        tokio::task::spawn_blocking(move || call()).await.unwrap();
        samples.push(started.elapsed());
    }
    percentiles(samples)
}

async fn time_block_in_place(call: &Call, rounds: usize) -> (f64, f64) {
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        tokio::task::block_in_place(|| call());
        samples.push(started.elapsed());
        // Let the runtime settle between calls as between two RPCs.
        tokio::task::yield_now().await;
    }
    percentiles(samples)
}

fn load(engine: &PolicyEngine, path: &str) -> Arc<Guest> {
    engine.load_file(std::path::Path::new(path)).expect("load")
}

fn context() -> CallContext {
    let mut ctx = CallContext::new(CallLimits {
        timeout: Duration::from_secs(1),
        memory_bytes: 64 * 1024 * 1024,
    });
    ctx.generation = Some(1);
    ctx
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).map_or(8, |a| a.parse().expect("N"));
    let rounds: usize = args.get(2).map_or(20_000, |a| a.parse().expect("ROUNDS"));
    let engine = PolicyEngine::new(EngineSettings::default()).expect("engine");

    let shaper = load(&engine, artifacts::ALLOCATE_SHAPER);
    let devices: Vec<DeviceRef> = request(n).available.into_iter().take(1).collect();
    let allocate: Call = {
        let ctx = context();
        Arc::new(move || {
            let answer = shaper
                .allocate(&ctx, &devices, &ContainerResponse::default())
                .expect("allocate");
            std::hint::black_box(answer);
        })
    };

    let packing = load(&engine, artifacts::NUMA_PACKING);
    let mut preferred_request = request(n);
    preferred_request.size = 8.min(n as u32);
    let available: Vec<u32> = (0..n as u32).collect();
    let must: Vec<u32> = vec![(n / 2) as u32];
    let preferred: Call = {
        let ctx = context();
        Arc::new(move || {
            let table: Vec<&DeviceRef> = preferred_request.available.iter().collect();
            let answer = packing
                .choose_by_index(&ctx, &table, &available, &must, preferred_request.size)
                .expect("preferred");
            std::hint::black_box(answer);
        })
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    println!("small guest calls, {n} devices, {rounds} rounds: p50 / p99 µs");
    for (name, call) in [
        ("allocate (1 device)", &allocate),
        ("preferred (8 of N)", &preferred),
    ] {
        call();
        let here = time_here(call, rounds);
        let handed = runtime.block_on(runtime.spawn({
            let call = Arc::clone(call);
            async move { time_spawn_blocking(&call, rounds).await }
        }));
        let in_place = runtime.block_on(runtime.spawn({
            let call = Arc::clone(call);
            async move { time_block_in_place(&call, rounds).await }
        }));
        let (handed, in_place) = (handed.unwrap(), in_place.unwrap());
        println!(
            "  {name:<22} on this thread {:>6.1} / {:>6.1}   spawn_blocking {:>6.1} / {:>6.1}   block_in_place {:>6.1} / {:>6.1}",
            here.0, here.1, handed.0, handed.1, in_place.0, in_place.1
        );
    }
}
