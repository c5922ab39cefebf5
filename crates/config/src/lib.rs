//! The configuration directory: `host.toml` (optional global settings) plus
//! one `*.toml` file per resource. Parsing refuses unknown keys, and every
//! error names the file, and where TOML can tell, the line and the field.
//!
//! The schema is documented key by key in `docs/config-reference.md`.
//!
//! It only reads and judges files: loading guests, reading hardware and
//! serving are `wdp-resource`'s and the host's. Names are judged by the
//! rules of `wdp-k8s-naming` (Kubernetes) and `wdp-cdi` (CDI), selectors
//! and guest hooks are `wdp-hardware`'s and `wdp-policy`'s types, and
//! [`limits`] holds the bounds every size the host computes is checked
//! against, the configuration's first.
//!
//! One job per module, each depending only on those listed before it:
//! `error` holds [`ConfigError`]; `model` the validated shapes
//! ([`ConfigSet`], [`ResourceConfig`], [`HookBinding`]) and the schema
//! constants; `schema` the TOML structs as written; `socket` how a
//! device-plugin socket is named and whether its path could be bound;
//! `serving` judges the `api` and `driver` keys and what a DRA resource may
//! not set; `validate` turns one parsed resource file into a
//! [`ResourceConfig`]; [`sets`] names the configuration sets a directory
//! holds; and `load` reads the directory, or one of its sets (special
//! files and oversized files refused without blocking), into a
//! [`ConfigSet`].

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod error;
pub mod limits;
mod load;
mod model;
mod passthrough;
mod schema;
mod serving;
pub mod sets;
mod socket;
mod validate;

pub use error::ConfigError;
pub use load::{load_dir, load_host_settings, load_set, read_config_file};
pub use model::{ConfigSet, HookBinding, ResourceConfig};
pub use passthrough::{BIND_TIMEOUT_MS, DEFAULT_BIND_TIMEOUT, Passthrough};
pub use schema::{
    CONFIG_VERSION, CdiEdits, CdiHook, CdiMode, CdiMount, ConfigSetsSettings, DEFAULT_SET_LABEL,
    GuestSignatures, HOST_FILE, HookConfig, HookDefaults, HostSettings, OnError, ServingApi,
};
pub use serving::{DEFAULT_PUBLISH_INTERVAL, PUBLISH_INTERVAL_MS, validate_driver_name};
pub use socket::{default_socket_name, socket_path, validate_socket_name};
pub use validate::{parse_resource, validate_resource_name};
