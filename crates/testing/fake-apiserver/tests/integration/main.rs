//! The integration tests of `fake-apiserver`, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); shared helpers in `common`.

mod common;

mod capacity;
mod claim_status;
mod claims_nodes;
mod drops;
mod outages;
mod partitions;
mod slices_crud;
mod test_side;
mod throttling;
mod validation;
mod watching;
