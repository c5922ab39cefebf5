use std::hint::black_box;
use std::time::{Duration, Instant};
use wdp_guest_artifacts as artifacts;
use wdp_policy::*;
include!("/tmp/bg/req.rs");
fn p50(mut f: impl FnMut(), n: usize) -> Duration {
    for _ in 0..n/10 { f(); }
    let mut v: Vec<Duration> = (0..n).map(|_| { let s = Instant::now(); f(); s.elapsed() }).collect();
    v.sort(); v[n/2]
}
fn main() {
    let engine = PolicyEngine::new(EngineSettings::default()).unwrap();
    let guest = engine.load_file(std::path::Path::new(artifacts::NUMA_PACKING)).unwrap();
    let trap = engine.load_file(std::path::Path::new(artifacts::HOSTILE_TRAP)).unwrap();
    let ctx = CallContext::new(CallLimits::default());
    let full = request(1024);
    let mut bare = full.clone();
    for d in &mut bare.available { d.attributes.clear(); d.nodes.clear(); }
    let mut small = full.clone();
    for d in &mut small.available { d.attributes.retain(|(k,_)| k == "pci.path"); d.nodes.clear(); }
    println!("full   {:?}", p50(|| { black_box(guest.choose(&ctx, &full).unwrap()); }, 200));
    println!("small  {:?}", p50(|| { black_box(guest.choose(&ctx, &small).unwrap()); }, 200));
    println!("bare   {:?}", p50(|| { black_box(guest.choose(&ctx, &bare).unwrap()); }, 200));
    // trap guest: choose with size 0 and available non-empty -> panics; measure lowering + trap
    let mut tiny = full.clone(); tiny.size = 0; tiny.must_include.clear();
    println!("full->size0 {:?}", p50(|| { black_box(guest.choose(&ctx, &tiny).unwrap()); }, 200));
    let _ = trap;
}
