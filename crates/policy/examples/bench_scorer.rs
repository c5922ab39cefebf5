//! Benchmark: the NUMA / link-locality packing scorer as a guest
//! (`numa-packing`, instantiated per call like every hook call) against the
//! same code (`wdp-packing-core`) compiled natively, at 8, 64 and 1,024
//! devices; plus the compile time of every example guest.
//!
//! Run in release: `cargo run --release -p wdp-policy --example bench_scorer`.
//!
//! "guest" is the full hook call: a fresh store, instantiation from the
//! pre-linked component, lowering the request into the guest (one guest
//! allocation per string and list), the packing, lifting the answer.
//! "native" is the packing alone on the already-built request. "trimmed"
//! sends each device with only the attribute the packer reads
//! (`pci.path`): lowering dominates the guest's cost at 1,024 devices.

use std::hint::black_box;
use std::time::{Duration, Instant};

use wdp_guest_artifacts as artifacts;
use wdp_test_support::measure::percentile;
#[path = "common/request.rs"]
mod common_request;
use common_request::request;
use wdp_policy::{CallContext, CallLimits, EngineSettings, PolicyEngine, PreferredRequest};

/// What the guest does, natively: borrow the request, pack, own the IDs.
fn native(request: &PreferredRequest) -> Vec<String> {
    let items: Vec<_> = request
        .available
        .iter()
        .map(|d| wdp_packing_core::Item::new(&d.id, &d.numa_nodes, &d.attributes))
        .collect();
    let must: Vec<&str> = request.must_include.iter().map(String::as_str).collect();
    wdp_packing_core::choose(&items, &must, request.size as usize)
        .expect("packable")
        .into_iter()
        .map(str::to_string)
        .collect()
}

fn measure(iterations: usize, mut f: impl FnMut()) -> Vec<Duration> {
    for _ in 0..iterations.div_ceil(10) {
        f(); // warm up
    }
    (0..iterations)
        .map(|_| {
            let started = Instant::now();
            f();
            started.elapsed()
        })
        .collect()
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let engine = PolicyEngine::new(EngineSettings::default()).expect("engine");
    println!("pooling allocator: {}", engine.uses_pooling());

    println!("\ncompile time per guest (median of 5, fresh compile each time):");
    for (name, path) in artifacts::EXAMPLES {
        let bytes = std::fs::read(path).expect("guest");
        let mut samples = measure(5, || engine.compile_only(&bytes).expect("compiles"));
        println!(
            "  {name:<16} {:>7} KiB  {:>8.1} ms",
            bytes.len() / 1024,
            percentile(&mut samples, 0.5).as_secs_f64() * 1e3
        );
    }
    let started = Instant::now();
    let guest = engine
        .load_file(std::path::Path::new(artifacts::NUMA_PACKING))
        .expect("load");
    println!(
        "  full load of numa-packing (compile + checks + pre-link + type-check instance): {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let ctx = CallContext::new(CallLimits {
        timeout: Duration::from_secs(1),
        memory_bytes: 64 * 1024 * 1024,
    });
    let mut empty = measure(2000, || {
        black_box(
            guest
                .choose(&ctx, &PreferredRequest::default())
                .expect("empty"),
        );
    });
    println!(
        "\nempty call (instantiate + trivial call) p50 {}  p99 {}",
        us(percentile(&mut empty, 0.5)),
        us(percentile(&mut empty, 0.99))
    );

    println!(
        "\n{:>7}  {:>11}  {:>11}  {:>11}  {:>6}  {:>15}  {:>6}",
        "devices", "guest p50", "guest p99", "native p50", "ratio", "trimmed p50", "ratio"
    );
    for (n, iterations) in [(8, 3000), (64, 2000), (1024, 300)] {
        let request = request(n);
        let expected = native(&request);
        assert_eq!(guest.choose(&ctx, &request).expect("guest"), expected);
        let mut guest_samples = measure(iterations, || {
            black_box(guest.choose(&ctx, black_box(&request)).expect("guest"));
        });
        let mut native_samples = measure(iterations, || {
            black_box(native(black_box(&request)));
        });
        // The same request with only the attribute the packer reads.
        let mut trimmed = request.clone();
        for device in &mut trimmed.available {
            device.attributes.retain(|(key, _)| key == "pci.path");
        }
        let mut trimmed_samples = measure(iterations, || {
            black_box(guest.choose(&ctx, black_box(&trimmed)).expect("guest"));
        });
        let guest_p50 = percentile(&mut guest_samples, 0.5);
        let native_p50 = percentile(&mut native_samples, 0.5);
        let trimmed_p50 = percentile(&mut trimmed_samples, 0.5);
        println!(
            "{n:>7}  {:>11}  {:>11}  {:>11}  {:>5.1}x  {:>15}  {:>5.1}x",
            us(guest_p50),
            us(percentile(&mut guest_samples, 0.99)),
            us(native_p50),
            guest_p50.as_secs_f64() / native_p50.as_secs_f64(),
            us(trimmed_p50),
            trimmed_p50.as_secs_f64() / native_p50.as_secs_f64()
        );
    }
}
