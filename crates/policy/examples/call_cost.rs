//! One preferred-allocation call, repeated, for instruction counting under
//! `valgrind --tool=callgrind`: the cost of one call is the difference
//! between a run of `1 + k` calls and a run of 1 call, divided by `k`.
//!
//! ```text
//! cargo build --release -p wdp-policy --example call_cost
//! valgrind --tool=callgrind target/release/examples/call_cost MODE N CALLS [GUEST.wasm]
//! ```
//!
//! MODE: `fresh` (a fresh instance and the full request lowered every
//! call, as before warm instances), `warm` (warm instance of one
//! generation, `choose_by_index`: the device table is sent once, then
//! indexes), `native` (`wdp-packing-core` compiled in, its table built per
//! call), `native-kept` (the table built once, as the guest keeps it). The request: N
//! devices shaped like the host's, one must-include, 8 wanted. Guests are
//! compiled once into `$TMPDIR/wdp-call-cost-cache` so the counted runs
//! load them precompiled.

use std::time::Duration;

use wdp_guest_artifacts as artifacts;
#[path = "common/request.rs"]
mod common_request;
use common_request::request;
use wdp_policy::{CallContext, CallLimits, DeviceRef, EngineSettings, PolicyEngine};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: call_cost fresh|warm|native|native-kept N CALLS [GUEST.wasm]";
    let mode = args.get(1).expect(usage).as_str();
    let n: usize = args.get(2).expect(usage).parse().expect(usage);
    let calls: usize = args.get(3).expect(usage).parse().expect(usage);
    let guest_path = args
        .get(4)
        .cloned()
        .unwrap_or_else(|| artifacts::NUMA_PACKING.to_owned());
    let mut request = request(n);
    request.size = 8.min(n as u32);
    let available: Vec<u32> = (0..n as u32).collect();
    let must: Vec<u32> = vec![(n / 2) as u32];

    if mode == "native-kept" {
        let items: Vec<_> = request
            .available
            .iter()
            .map(|d| wdp_packing_core::Item::new(&d.id, &d.numa_nodes, &d.attributes))
            .collect();
        let table = wdp_packing_core::Table::new(&items);
        for _ in 0..calls {
            let chosen = table
                .choose(&available, &must, request.size as usize)
                .expect("packable");
            std::hint::black_box(
                chosen
                    .into_iter()
                    .map(|p| table.id(p).to_owned())
                    .collect::<Vec<_>>(),
            );
        }
        return;
    }
    if mode == "native" {
        for _ in 0..calls {
            let items: Vec<_> = request
                .available
                .iter()
                .map(|d| wdp_packing_core::Item::new(&d.id, &d.numa_nodes, &d.attributes))
                .collect();
            let must: Vec<&str> = request.must_include.iter().map(String::as_str).collect();
            let chosen =
                wdp_packing_core::choose(&items, &must, request.size as usize).expect("packable");
            std::hint::black_box(chosen.into_iter().map(str::to_owned).collect::<Vec<_>>());
        }
        return;
    }

    let engine = PolicyEngine::new(EngineSettings {
        precompiled_cache_dir: Some(std::env::temp_dir().join("wdp-call-cost-cache")),
        ..EngineSettings::default()
    })
    .expect("engine");
    let guest = engine
        .load_file(std::path::Path::new(&guest_path))
        .expect("load");
    let mut ctx = CallContext::new(CallLimits {
        timeout: Duration::from_secs(60),
        memory_bytes: 64 * 1024 * 1024,
    });
    let table: Vec<&DeviceRef> = request.available.iter().collect();
    for _ in 0..calls {
        let answer = match mode {
            "fresh" => guest.choose(&ctx, &request).expect("guest"),
            "warm" => {
                ctx.generation = Some(1);
                guest
                    .choose_by_index(&ctx, &table, &available, &must, request.size)
                    .expect("guest")
                    .into_ids(&table)
                    .expect("in the table")
            }
            other => panic!("unknown mode {other:?}; {usage}"),
        };
        assert_eq!(answer.len(), request.size as usize);
    }
}
