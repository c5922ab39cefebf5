//! The integration tests of the simulated kubelet, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); the small drivers they run against in `support`.

mod dra;
mod plugin_watcher;
mod support;
