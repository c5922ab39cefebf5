//! What one poll costs: a resource over N character-device nodes
//! (`/dev/acc0` … in a temporary host tree, made with `mknod` when run as
//! root, empty files otherwise), refreshed again and again with nothing
//! changed; prints the wall time of the hardware scan alone
//! ([`wdp_hardware::discover`], every directory read), of a whole refresh
//! ([`Resource::refresh`], what a poll runs: the scan through the hardware
//! watch's kept listings, health, the device set, the comparison with the
//! set being advertised) and of a resource's first run ([`Resource::new`], what
//! start-up waits for before serving), p50 and p90, hot (back to back) and
//! cold (after `WDP_BENCH_GAP_MS`, default 1000, of sleep, as a poll finds
//! its caches).
//!
//! Run: `cargo run --release -p wdp-resource --example bench_refresh`
//! (`WDP_BENCH_SIZES=8,1024` and `WDP_BENCH_ROUNDS=20` by default).

use std::path::Path;
use std::time::{Duration, Instant};

use wdp_hardware::HostRoot;
use wdp_resource::{Resource, ResourceMetrics};

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn make_node(path: &Path, minor: u32) {
    let made = rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o600),
        rustix::fs::makedev(240, minor),
    );
    if made.is_err() {
        std::fs::write(path, b"").unwrap();
    }
}

/// p50 and p90 of `samples`, in microseconds.
fn spread(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    format!(
        "p50 {:>7.0} µs  p90 {:>7.0} µs",
        at(0.5).as_secs_f64() * 1e6,
        at(0.9).as_secs_f64() * 1e6
    )
}

fn main() {
    let sizes: Vec<usize> = std::env::var("WDP_BENCH_SIZES")
        .unwrap_or_else(|_| "8,1024".into())
        .split(',')
        .map(|s| s.trim().parse().expect("WDP_BENCH_SIZES: numbers"))
        .collect();
    let rounds: usize = env_or("WDP_BENCH_ROUNDS", 20);
    let gap = Duration::from_millis(env_or("WDP_BENCH_GAP_MS", 1000));
    for n in sizes {
        let tmp = tempfile::tempdir().unwrap();
        let (root, config) = (tmp.path().join("host"), tmp.path().join("config"));
        std::fs::create_dir_all(root.join("dev")).unwrap();
        std::fs::create_dir_all(&config).unwrap();
        for i in 0..n {
            make_node(&root.join(format!("dev/acc{i}")), i as u32);
        }
        std::fs::write(
            config.join("acc.toml"),
            "version = 1\nresource = \"example.com/acc\"\n[[nodes]]\npath = \"/dev/acc*\"\n",
        )
        .unwrap();
        let config = wdp_config::load_dir(&config).unwrap();
        let engine = wdp_resource::new_engine(&config).unwrap();
        let spec = wdp_resource::load_specs(&engine, &config)
            .unwrap()
            .into_values()
            .next()
            .unwrap();
        let root = HostRoot::new(&root);
        // A resource's first run: what start-up waits for.
        let new_resource = || {
            let (resource, _) = Resource::new(
                spec.clone(),
                root.clone(),
                ResourceMetrics::unregistered(),
                None,
            )
            .unwrap();
            assert_eq!(resource.devices().len(), n);
            resource
        };
        let first_run = || drop(new_resource());
        let resource = new_resource();
        let selectors = resource.spec().config.selectors.clone();

        let time = |f: &dyn Fn()| {
            let started = Instant::now();
            f();
            started.elapsed()
        };
        let scan = || {
            let found = wdp_hardware::discover(&root, &selectors).unwrap();
            assert_eq!(found.candidates.len(), n);
        };
        let refresh = || assert!(!resource.refresh(), "nothing changed");
        for (name, f) in [
            ("scan", &scan as &dyn Fn()),
            ("refresh", &refresh),
            ("first", &first_run),
        ] {
            let hot: Vec<Duration> = (0..rounds).map(|_| time(f)).collect();
            let cold: Vec<Duration> = (0..rounds.min(10))
                .map(|_| {
                    std::thread::sleep(gap);
                    time(f)
                })
                .collect();
            println!(
                "{n:>6} nodes  {name:<8} hot {}   cold {}",
                spread(hot),
                spread(cold)
            );
        }
    }
}
