//! The integration tests of `host`, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); shared helpers in `common`.

mod common;

mod admin_nodes;
mod api_switch;
mod config_sets;
mod dra;
mod dra_metadata;
mod dra_partitions;
mod dra_reboot;
mod dra_taints;
mod guest_threads;
mod last_good;
mod passthrough;
mod passthrough_guest;
mod pinned;
mod refusals;
mod serving;
mod shutdown;
mod signed;
mod start_order;
mod switch_summary;
