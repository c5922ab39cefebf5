//! The pure Kubernetes naming and quantity rules the host checks before
//! anything reaches an API server: [`names`] holds the DNS label and
//! subdomain forms, the DRA driver name check and the reversible mapping of
//! device IDs to DRA device names; [`labels`] the label name and value
//! rules; [`quantity`] parses Kubernetes quantities exactly.
//!
//! It does no I/O and links no client: the configuration (`wdp-resource`)
//! judges names with it as the API client (`wdp-dra-client`) does, without
//! pulling kube, hyper or tonic into the resource model.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod labels;
pub mod names;
pub mod quantity;

pub use labels::{label_name_problem, label_value_problem};
pub use names::{
    MAX_DNS_LABEL_LEN, NameError, check_driver_name, device_id, device_name, dns_label_problem,
    dns_subdomain_problem,
};
pub use quantity::{Quantity, QuantityError};
