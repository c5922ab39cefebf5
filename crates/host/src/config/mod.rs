//! The configuration directory: `host.toml` (optional global settings) plus
//! one `*.toml` file per resource. Parsing refuses unknown keys, and every
//! error names the file, and where TOML can tell, the line and the field.
//!
//! The schema is documented key by key in `docs/config-reference.md`.
//!
//! Four jobs, one module each: `schema` holds the TOML structs as
//! written, `validate` turns one parsed resource file into a
//! [`ResourceConfig`] (with `serving` judging the `api` and `driver` keys
//! and what a DRA resource may not set), and `load` reads the directory (special files and
//! oversized files refused without blocking) into a [`ConfigSet`].

mod load;
mod schema;
mod serving;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wdp_hardware::{NodeSelector, Selector};
use wdp_policy::Hook;

pub use load::{load_dir, read_config_file};
pub use schema::{
    CdiEdits, CdiHook, CdiMode, CdiMount, HookConfig, HookDefaults, HostSettings, OnError,
    ServingApi,
};
pub use serving::validate_driver_name;
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
    /// The directory cannot be listed.
    #[error("config directory {dir}: {source}")]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A config file cannot be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An entry named like a config file that is not a regular file (after
    /// following symlinks): a FIFO, a device, a directory, a socket.
    #[error("{file}: {kind}, not a regular file; remove it or move it out of the config directory")]
    NotAFile {
        /// The entry.
        file: PathBuf,
        /// What it is instead, e.g. `a FIFO`.
        kind: &'static str,
    },
    /// A config file above [`crate::limits::MAX_CONFIG_FILE_BYTES`].
    #[error("{file}: larger than {limit} bytes, the most a config file may have")]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// The cap in bytes.
        limit: u64,
    },
    /// TOML syntax errors, unknown keys and wrong types. `detail` holds the
    /// parser's message with line, column and the offending key.
    #[error("{file}: {detail}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// A value breaks a rule; names the file and field.
    #[error("{file}: field `{field}`: {problem}")]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The field, e.g. `nodes[0].replicas`.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// Two files declare the same resource.
    #[error("{file} and {other}: both declare resource `{resource}`")]
    DuplicateResource {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The resource name.
        resource: String,
    },
    /// Two resources name the same DRA driver.
    #[error("{file} and {other}: both serve DRA driver `{driver}`")]
    DuplicateDriver {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The driver name.
        driver: String,
    },
    /// Two resources would serve the same socket.
    #[error("{file} and {other}: both use socket `{socket}`")]
    DuplicateSocket {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The socket name.
        socket: String,
    },
}

/// Everything read from a configuration directory.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigSet {
    /// The directory.
    pub dir: PathBuf,
    /// `host.toml`, or the defaults when absent.
    pub host: HostSettings,
    /// Resources keyed by resource name.
    pub resources: BTreeMap<String, ResourceConfig>,
}

/// A hook bound to a guest, with limits resolved against the defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookBinding {
    /// The hook.
    pub hook: Hook,
    /// Absolute (or config-dir-joined) path of the guest.
    pub guest: PathBuf,
    /// Deadline of each call.
    pub timeout: Duration,
    /// Memory cap of each call.
    pub memory_limit_bytes: u64,
    /// What a failed call falls back to.
    pub on_error: OnError,
}

/// A validated resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceConfig {
    /// The file it came from.
    pub file: PathBuf,
    /// Extended resource name, `domain/name`.
    pub resource: String,
    /// Socket file name inside the device-plugin directory; empty for a
    /// DRA resource, which has none.
    pub socket: String,
    /// Whether `PreStartContainer` is registered.
    pub pre_start_required: bool,
    /// Whether `GetPreferredAllocation` is registered.
    pub get_preferred_allocation: bool,
    /// How often hardware is rescanned without an event.
    pub poll_interval: Duration,
    /// Cgroup permissions of built-in device specs.
    pub permissions: String,
    /// The hardware the resource selects.
    pub selectors: Vec<Selector>,
    /// Replica count per node selector index (`selectors[i]`), when set.
    pub replicas: BTreeMap<usize, u32>,
    /// The hooks bound to guests.
    pub hooks: Vec<HookBinding>,
    /// `[guest-config]`, flattened to strings for the guests.
    pub guest_config: Vec<(String, String)>,
    /// Attributes guests may write (`writable-attributes`).
    pub writable_attributes: Vec<String>,
    /// `[[companion-nodes]]`: nodes every container of the resource gets.
    pub companions: Vec<NodeSelector>,
    /// How `Allocate` names devices, and whether a CDI spec is written.
    pub cdi: CdiMode,
    /// `[cdi-edits]`: what the CDI spec adds to every container.
    pub cdi_edits: CdiEdits,
    /// Which kubelet API serves the resource.
    pub api: ServingApi,
    /// The DRA driver name (a DNS subdomain); set exactly when `api` is
    /// [`ServingApi::Dra`].
    pub driver: Option<String>,
}

impl ConfigSet {
    /// Refuses the first resource whose socket, joined with the
    /// device-plugin directory `plugin_dir`, is too long to ever be bound
    /// (see [`socket_path`]). `check` cannot know the run-time directory;
    /// `run` calls this at start and on every reload.
    pub fn check_socket_paths(&self, plugin_dir: &Path) -> Result<(), ConfigError> {
        for resource in self.device_plugin_resources() {
            socket_path(resource, plugin_dir)?;
        }
        Ok(())
    }

    /// The resources served through the device-plugin API.
    pub fn device_plugin_resources(&self) -> impl Iterator<Item = &ResourceConfig> {
        self.resources.values().filter(|r| r.driver.is_none())
    }

    /// The resources served as DRA drivers, with their driver names.
    pub fn dra_resources(&self) -> impl Iterator<Item = (&str, &ResourceConfig)> {
        self.resources
            .values()
            .filter_map(|r| Some((r.driver.as_deref()?, r)))
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
