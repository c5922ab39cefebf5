//! Resident bytes a resource of many device nodes holds (read after the
//! allocator trimmed its free memory), and the CPU one unchanged refresh
//! costs: the fast loop for the scale goal (< 1 KB of RSS a device)
//! without a release build.
//! `cargo run -p wdp-host --example scale_heap [DEVICES]` (default 65,000).
//!
//! Prints the resident bytes per device after the first load and after
//! three unchanged refreshes, what the device set and a hardware scan's
//! candidates take (measured by building a copy), and the thread CPU time
//! of each refresh.

use std::time::Instant;

use wdp_test_support::measure::thread_cpu_time as thread_cpu;

/// Resident bytes after the allocator handed its free memory back (the
/// figure the scale bench reads; the workspace forbids the `unsafe` a
/// counting allocator would take).
fn live() -> isize {
    wdp_memory::release_free_memory();
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: isize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// What keeping `make()`'s result alive costs, per device.
fn held<T>(devices: usize, make: impl FnOnce() -> T) -> String {
    let before = live();
    let value = make();
    let after = live();
    drop(value);
    format!("{:>6.0} B", (after - before) as f64 / devices as f64)
}

fn main() {
    let devices: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(65_000);
    let tmp = tempfile::tempdir().unwrap();
    let (root, config) = (tmp.path().join("root"), tmp.path().join("config"));
    std::fs::create_dir_all(root.join("dev/many")).unwrap();
    std::fs::create_dir_all(&config).unwrap();
    for i in 0..devices {
        std::fs::write(root.join(format!("dev/many/d{i}")), b"").unwrap();
    }
    std::fs::write(
        config.join("many.toml"),
        "version = 1\nresource = \"bench.example.com/many\"\n[[nodes]]\npath = \"/dev/many/d*\"\n",
    )
    .unwrap();

    let before = live();
    let started = Instant::now();
    let resources = wdp_host::load_offline(&config, &root).unwrap();
    let loaded = started.elapsed();
    let resource = resources[0].0.clone();
    assert_eq!(resource.devices().len(), devices);
    let after_load = live();
    let mut refresh_cpu = Vec::new();
    for _ in 0..3 {
        let cpu = thread_cpu();
        let wall = Instant::now();
        assert!(!resource.refresh(), "nothing changed");
        refresh_cpu.push((thread_cpu() - cpu, wall.elapsed()));
    }
    let after_refresh = live();
    let per = |bytes: isize| format!("{:>6.0} B", (bytes - before) as f64 / devices as f64);
    println!("{devices} device nodes, one resource (loaded in {loaded:?})");
    println!("  resident per device after load:      {}", per(after_load));
    println!(
        "  resident per device after refreshes: {}",
        per(after_refresh)
    );
    let set = resource.devices();
    println!(
        "  of which the device set:              {}",
        held(devices, || (*set).clone())
    );
    println!(
        "  of which a ListAndWatch message:      {}",
        held(devices, || wdp_device_plugin::wire::device_list(&set))
    );
    let hardware_root = wdp_hardware::HostRoot::new(&root);
    let selectors = resource.spec().config.selectors.clone();
    println!(
        "  a hardware scan's candidates:         {}",
        held(devices, || wdp_hardware::discover(
            &hardware_root,
            &selectors
        )
        .unwrap()
        .candidates)
    );
    for (cpu, wall) in refresh_cpu {
        println!("  unchanged refresh: {cpu:?} CPU, {wall:?} wall");
    }
}
