//! x
pub mod types;
#[allow(missing_docs)]
mod bindings;
