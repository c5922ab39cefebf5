//! The integration tests of `hardware`, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); shared helpers in `common`.

mod common;

mod attribute_access;
mod fixture_trees;
mod odd_and_hotplug;
mod real_machine;
mod record;
