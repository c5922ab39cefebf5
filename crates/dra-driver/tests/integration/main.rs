//! The integration tests of `dra-driver`, one module per file under
//! `tests/integration/`, built as one test binary (one link instead of one
//! per file).

mod common;
mod health;
mod publish;
