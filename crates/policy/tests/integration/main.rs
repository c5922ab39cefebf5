//! The integration tests of `policy`, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); shared helpers in `common`.

mod common;

mod claim;
mod dra_hooks;
mod examples;
mod hooks_0_1_3;
mod loading;
mod precompiled;
mod sandbox;
mod signature;
mod warm;
