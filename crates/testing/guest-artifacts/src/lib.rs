//! Paths to the policy guests of `guests/`, built for `wasm32-wasip2` by
//! this crate's build script (a nested `cargo build --release` with its
//! own target directory, `target/guests/`), for tests and benchmarks.
//!
//! Each guest has a constant holding the absolute path of its `.wasm`
//! component, e.g. [`NUMA_PACKING`]; [`ALL`], [`EXAMPLES`] and
//! [`TEST_GUESTS`] list them as `(package name, path)`.
//!
//! Only tests and benchmarks depend on this crate (as a dev-dependency):
//! the shipped binary builds no guest, and this crate writes nothing
//! outside `target/`. The shipped configuration's guests in
//! `config/guests/` come from `bash guests/build.sh`, which builds into the
//! same `target/guests/`.
//!
//! Building needs the `wasm32-wasip2` target: `rustup target add
//! wasm32-wasip2`.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
