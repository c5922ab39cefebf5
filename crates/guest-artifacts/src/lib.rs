//! Paths to the policy guests of `guests/`, built for `wasm32-wasip2` by
//! this crate's build script (a nested `cargo build --release` with its
//! own target directory, `target/guests/`).
//!
//! Each guest has a constant holding the absolute path of its `.wasm`
//! component, e.g. [`NUMA_PACKING`]; [`ALL`], [`EXAMPLES`] and
//! [`TEST_GUESTS`] list them as `(package name, path)`. The build also
//! copies the five example guests to `config/guests/<package>.wasm` (only
//! when their content changed), where the shipped configuration refers to
//! them; set `WDP_SKIP_GUEST_COPY` to skip that.
//!
//! Building needs the `wasm32-wasip2` target: `rustup target add
//! wasm32-wasip2`.

include!(concat!(env!("OUT_DIR"), "/guests.rs"));
