//! The configuration directory: `host.toml` (optional global settings) plus
//! one `*.toml` file per resource. Parsing refuses unknown keys, and every
//! error names the file, and where TOML can tell, the line and the field.
//!
//! The schema is documented key by key in `docs/config-reference.md`.
//!
//! Three jobs, one module each: `schema` holds the TOML structs as
//! written, `validate` turns one parsed resource file into a
//! [`ResourceConfig`], and `load` reads the directory (special files and
//! oversized files refused without blocking) into a [`ConfigSet`].

mod load;
mod schema;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wdp_hardware::Selector;
use wdp_policy::Hook;

pub use load::{load_dir, read_config_file};
pub use schema::{HookConfig, HookDefaults, HostSettings, OnError};
pub use validate::{
    default_socket_name, parse_resource, socket_path, validate_resource_name, validate_socket_name,
};

/// The only schema version this host understands.
pub const CONFIG_VERSION: u32 = 1;
/// File name of the global settings inside the config directory.
pub const HOST_FILE: &str = "host.toml";
/// Longest device ID the kubelet accepts.
pub const MAX_DEVICE_ID_LEN: usize = 63;

/// A configuration error, always naming the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config directory {dir}: {source}")]
    Directory {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: cannot read: {source}")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An entry named like a config file that is not a regular file (after
    /// following symlinks): a FIFO, a device, a directory, a socket.
    #[error("{file}: {kind}, not a regular file; remove it or move it out of the config directory")]
    NotAFile { file: PathBuf, kind: &'static str },
    /// A config file above [`crate::limits::MAX_CONFIG_FILE_BYTES`].
    #[error("{file}: larger than {limit} bytes, the most a config file may have")]
    TooLarge { file: PathBuf, limit: u64 },
    /// TOML syntax errors, unknown keys and wrong types. `detail` holds the
    /// parser's message with line, column and the offending key.
    #[error("{file}: {detail}")]
    Parse { file: PathBuf, detail: String },
    #[error("{file}: field `{field}`: {problem}")]
    Invalid {
        file: PathBuf,
        field: String,
        problem: String,
    },
    #[error("{file} and {other}: both declare resource `{resource}`")]
    DuplicateResource {
        file: PathBuf,
        other: PathBuf,
        resource: String,
    },
    #[error("{file} and {other}: both use socket `{socket}`")]
    DuplicateSocket {
        file: PathBuf,
        other: PathBuf,
        socket: String,
    },
}

/// Everything read from a configuration directory.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigSet {
    pub dir: PathBuf,
    pub host: HostSettings,
    /// Resources keyed by resource name.
    pub resources: BTreeMap<String, ResourceConfig>,
}

/// A hook bound to a guest, with limits resolved against the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookBinding {
    pub hook: Hook,
    /// Absolute (or config-dir-joined) path of the guest.
    pub guest: PathBuf,
    pub timeout: Duration,
    pub memory_limit_bytes: u64,
    pub on_error: OnError,
}

/// A validated resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// Extended resource name, `domain/name`.
    pub resource: String,
    /// Socket file name inside the device-plugin directory.
    pub socket: String,
    pub pre_start_required: bool,
    pub get_preferred_allocation: bool,
    pub poll_interval: Duration,
    /// Cgroup permissions of built-in device specs.
    pub permissions: String,
    pub selectors: Vec<Selector>,
    /// Replica count per node selector index (`selectors[i]`), when set.
    pub replicas: BTreeMap<usize, u32>,
    pub hooks: Vec<HookBinding>,
    /// `[guest-config]`, flattened to strings for the guests.
    pub guest_config: Vec<(String, String)>,
    pub writable_attributes: Vec<String>,
}

impl ConfigSet {
    /// Refuses the first resource whose socket, joined with the
    /// device-plugin directory `plugin_dir`, is too long to ever be bound
    /// (see [`socket_path`]). `check` cannot know the run-time directory;
    /// `run` calls this at start and on every reload.
    pub fn check_socket_paths(&self, plugin_dir: &Path) -> Result<(), ConfigError> {
        for resource in self.resources.values() {
            socket_path(resource, plugin_dir)?;
        }
        Ok(())
    }
}

impl ResourceConfig {
    /// The binding of `hook`, if a guest implements it.
    pub fn hook(&self, hook: Hook) -> Option<&HookBinding> {
        self.hooks.iter().find(|b| b.hook == hook)
    }

    /// Whether a change from `old` to `self` needs a new registration with
    /// the kubelet (options or socket differ).
    pub fn registration_differs(&self, old: &ResourceConfig) -> bool {
        self.socket != old.socket
            || self.pre_start_required != old.pre_start_required
            || self.get_preferred_allocation != old.get_preferred_allocation
    }
}
