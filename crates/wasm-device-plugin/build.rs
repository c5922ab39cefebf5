//! Lays the code one start runs out together in the optimised glibc x86_64
//! binary: the functions named in `link/startup-order.txt` (written by
//! `tools/startup-order.sh` from a profile of one start) are placed first
//! by lld's `--symbol-ordering-file`, so a start after the binary's pages
//! left the page cache reads one run of a few MiB instead of touching
//! pages across the whole `.text` (docs/performance.md, "Start-up code
//! laid out together").
//!
//! Only where the linker is the target's default, rust-lld
//! (`x86_64-unknown-linux-gnu` since Rust 1.90), and the profile is an
//! optimised one inheriting `release`: the names are those of the shipped
//! `release` profile with default features, and any other build's differ
//! (cargo's `-C metadata` is in every name). Names that match nothing
//! (stale ones, after a dependency or compiler update) are ignored, so a
//! stale file costs only the layout's benefit, never a build.
//! `WDP_NO_STARTUP_ORDER=1` turns it off.

use std::path::Path;

fn main() {
    println!("cargo::rerun-if-changed=link/startup-order.txt");
    println!("cargo::rerun-if-env-changed=WDP_NO_STARTUP_ORDER");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let default_linker = var("RUSTC_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS")
            .split('\x1f')
            .any(|flag| flag.contains("linker"));
    let wanted = var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("PROFILE") == "release"
        && var("OPT_LEVEL") != "0"
        && var("WDP_NO_STARTUP_ORDER").is_empty()
        && default_linker;
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/startup-order.txt");
    if wanted && order.is_file() {
        println!(
            "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
