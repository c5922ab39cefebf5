//! The integration tests of `dra-client`, one module per file
//! under `tests/integration/`, built as one test binary (one link instead
//! of one per file); shared helpers in `common`.

mod common;

mod client;
mod device_status;
mod logging;
mod partitions;
mod publisher;
mod publisher_failures;
mod publisher_fence;
mod publisher_pacing;
mod validate_agrees;
mod validate_pool_agrees;
