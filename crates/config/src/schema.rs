//! The TOML schema of the configuration directory, as written: the serde
//! structs of `host.toml` and of a resource file, their defaults, and the
//! parser that turns a file's text into them. Nothing here judges values
//! beyond their types; that is `validate`'s job.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use wdp_hardware::{PciSelector, UsbSelector};

use super::error::ConfigError;

/// The only schema version this host understands.
pub const CONFIG_VERSION: u32 = 1;
/// File name of the global settings inside the config directory.
pub const HOST_FILE: &str = "host.toml";

/// Global settings from `host.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostSettings {
    /// Config format version; must be 1.
    #[serde(default = "default_version")]
    pub version: u32,
    /// Defaults for every hook of every resource.
    #[serde(default)]
    pub hook_defaults: HookDefaults,
    /// How often device health and discovery are refreshed without a
    /// hardware event, unless a resource says otherwise.
    #[serde(default = "default_poll_ms")]
    pub poll_interval_ms: u64,
    /// How long a burst of config-directory changes must be quiet before it
    /// is applied.
    #[serde(default = "default_debounce_ms")]
    pub reload_debounce_ms: u64,
    /// Directory for precompiled guests, relative to the config directory
    /// or absolute; off when absent.
    #[serde(default)]
    pub precompiled_cache_dir: Option<PathBuf>,
    /// `[guest-signatures]`: keys every guest of every resource must be
    /// signed by (none: signatures not required).
    #[serde(default)]
    pub guest_signatures: GuestSignatures,
    /// `[config-sets]`: which node label picks the configuration set (see
    /// `super::sets`).
    #[serde(default)]
    pub config_sets: ConfigSetsSettings,
}

/// The node label that picks a node's configuration set.
pub const DEFAULT_SET_LABEL: &str = "wasm-device-plugin.io/config";

/// `[config-sets]` in `host.toml`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigSetsSettings {
    /// The node label whose value names the set the node runs.
    #[serde(default = "default_set_label")]
    pub node_label: String,
    /// Write the outcome of each switch into the node label
    /// `<node-label>.state` (`pending`, `success`, `failed`); needs the
    /// `patch` verb on nodes.
    #[serde(default)]
    pub report_state: bool,
}

impl Default for ConfigSetsSettings {
    fn default() -> Self {
        Self {
            node_label: default_set_label(),
            report_state: false,
        }
    }
}

fn default_set_label() -> String {
    DEFAULT_SET_LABEL.to_owned()
}

/// `[guest-signatures]`, in `host.toml` (every resource) or a resource
/// file (that resource, beside the host's keys).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GuestSignatures {
    /// PEM ECDSA P-256 public keys, relative to the config directory or
    /// absolute; a guest must carry a signature one of them verifies.
    #[serde(default)]
    pub trusted_keys: Vec<PathBuf>,
}

impl Default for HostSettings {
    fn default() -> Self {
        Self {
            version: CONFIG_VERSION,
            hook_defaults: HookDefaults::default(),
            poll_interval_ms: default_poll_ms(),
            reload_debounce_ms: default_debounce_ms(),
            precompiled_cache_dir: None,
            guest_signatures: GuestSignatures::default(),
            config_sets: ConfigSetsSettings::default(),
        }
    }
}

/// Limits applied to a hook when its resource does not set them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HookDefaults {
    /// Deadline of a hook call, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Memory cap of a hook call, in MiB.
    #[serde(default = "default_memory_mib")]
    pub memory_limit_mib: u64,
    /// What a failed call falls back to.
    #[serde(default)]
    pub on_error: OnError,
}

impl Default for HookDefaults {
    fn default() -> Self {
        Self {
            timeout_ms: default_timeout_ms(),
            memory_limit_mib: default_memory_mib(),
            on_error: OnError::default(),
        }
    }
}

/// How `Allocate` names a resource's devices (`cdi = …`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CdiMode {
    /// Device specs only; no CDI spec is written.
    #[default]
    Off,
    /// CDI device names only (`cdi_devices`); the runtime injects what the
    /// written spec lists.
    Names,
    /// Device specs and CDI device names.
    Both,
}

/// `[cdi-edits]`: what the resource's CDI spec adds to every container
/// besides device and companion nodes (driver libraries, tools, hooks).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CdiEdits {
    /// `NAME=value` environment entries.
    #[serde(default)]
    pub env: Vec<String>,
    /// Bind mounts.
    #[serde(default)]
    pub mounts: Vec<CdiMount>,
    /// OCI hooks.
    #[serde(default)]
    pub hooks: Vec<CdiHook>,
}

/// `[[cdi-edits.mounts]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CdiMount {
    /// Path on the host.
    pub host_path: String,
    /// Path in the container.
    pub container_path: String,
    /// Mount options, e.g. `["ro", "nosuid", "nodev", "bind"]`.
    #[serde(default)]
    pub options: Vec<String>,
}

/// `[[cdi-edits.hooks]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CdiHook {
    /// When it runs: `prestart`, `createRuntime`, `createContainer`,
    /// `startContainer`, `poststart` or `poststop`.
    pub hook_name: String,
    /// The program, an absolute host path.
    pub path: String,
    /// Its arguments, `args[0]` included.
    #[serde(default)]
    pub args: Vec<String>,
}

/// Which kubelet API serves a resource (`api = …`). A device is served by
/// exactly one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServingApi {
    /// The device-plugin API: a socket in the device-plugin folder,
    /// `ListAndWatch`, `Allocate`.
    #[default]
    DevicePlugin,
    /// Dynamic Resource Allocation: ResourceSlices, `NodePrepareResources`
    /// through a kubelet plugin named by `driver`.
    Dra,
}

impl fmt::Display for ServingApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DevicePlugin => "device-plugin",
            Self::Dra => "dra",
        })
    }
}

/// What happens when a guest hook traps, times out or answers nonsense.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// The kubelet call fails with the guest's error (discovery and health
    /// keep the last good device list instead).
    #[default]
    Fail,
    /// The built-in behaviour answers instead, and the failure is logged.
    Builtin,
}

impl fmt::Display for OnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Fail => "fail",
            Self::Builtin => "builtin",
        })
    }
}

/// One resource file, as written.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawResource {
    pub(super) version: u32,
    pub(super) resource: String,
    #[serde(default)]
    pub(super) api: ServingApi,
    #[serde(default)]
    pub(super) driver: Option<String>,
    #[serde(default)]
    pub(super) socket: Option<String>,
    #[serde(default)]
    pub(super) pre_start_required: Option<bool>,
    #[serde(default)]
    pub(super) get_preferred_allocation: Option<bool>,
    #[serde(default)]
    pub(super) poll_interval_ms: Option<u64>,
    /// Read as the widest TOML integer so that a negative value is refused
    /// by name instead of as a type error.
    #[serde(default)]
    pub(super) publish_interval_ms: Option<i64>,
    /// `device-metadata`: DRA only; unset is on.
    #[serde(default)]
    pub(super) device_metadata: Option<bool>,
    #[serde(default = "default_permissions")]
    pub(super) permissions: String,
    #[serde(default)]
    pub(super) nodes: Vec<NodeEntry>,
    #[serde(default)]
    pub(super) companion_nodes: Vec<CompanionEntry>,
    #[serde(default)]
    pub(super) cdi: CdiMode,
    #[serde(default)]
    pub(super) cdi_edits: CdiEdits,
    #[serde(default)]
    pub(super) pci: Vec<PciSelector>,
    #[serde(default)]
    pub(super) usb: Vec<UsbSelector>,
    #[serde(default)]
    pub(super) hooks: RawHooks,
    #[serde(default)]
    pub(super) guest_config: toml::Table,
    #[serde(default)]
    pub(super) writable_attributes: Vec<String>,
    /// Administrative node kinds the resource hands out on purpose, by
    /// name (`nvidia-mig-monitor`, …).
    #[serde(default)]
    pub(super) grant_admin_nodes: Vec<String>,
    #[serde(default)]
    pub(super) guest_signatures: GuestSignatures,
    /// `[passthrough]`: bind prepared devices to another kernel driver.
    #[serde(default)]
    pub(super) passthrough: Option<super::passthrough::RawPassthrough>,
}

/// `[[nodes]]`: device nodes by path or glob, each match one device.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct NodeEntry {
    /// A host path or glob, e.g. `/dev/fuse` or `/dev/dri/renderD*`.
    pub(super) path: String,
    /// A literal path that does not exist is an error unless optional.
    #[serde(default)]
    pub(super) optional: bool,
    /// How many times each matched node is advertised. Read as the widest
    /// TOML integer so that an absurd count is refused by name instead of
    /// as a type error.
    #[serde(default)]
    pub(super) replicas: Option<i64>,
}

/// `[[companion-nodes]]`: control nodes every container of the resource
/// receives with its devices, never advertised as devices themselves.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct CompanionEntry {
    /// A host path or glob, e.g. `/dev/nvidiactl` or `/dev/nvidia-uvm*`.
    pub(super) path: String,
    /// When missing: not added (`true`), or the resource's devices go
    /// Unhealthy (`false`, the default).
    #[serde(default)]
    pub(super) optional: bool,
}

/// `[hooks]`: one optional table per hook.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawHooks {
    pub(super) discovery: Option<HookConfig>,
    pub(super) health: Option<HookConfig>,
    pub(super) preferred_allocation: Option<HookConfig>,
    pub(super) allocate: Option<HookConfig>,
    pub(super) pre_start: Option<HookConfig>,
    pub(super) dra_layout: Option<HookConfig>,
    pub(super) dra_prepare: Option<HookConfig>,
    pub(super) dra_unprepare: Option<HookConfig>,
    pub(super) device_taints: Option<HookConfig>,
    pub(super) passthrough: Option<HookConfig>,
}

/// `[hooks.<name>]`: the guest that implements one hook and its limits.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HookConfig {
    /// Path of the `.wasm` component, relative to the config directory.
    pub guest: PathBuf,
    /// The guest file's pinned SHA-256 (64 hex digits), when set.
    pub sha256: Option<String>,
    /// Deadline of each call, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// Memory cap of each call, in MiB.
    pub memory_limit_mib: Option<u64>,
    /// What a failed call falls back to.
    pub on_error: Option<OnError>,
}

fn default_version() -> u32 {
    CONFIG_VERSION
}
fn default_poll_ms() -> u64 {
    5_000
}
fn default_debounce_ms() -> u64 {
    10
}
fn default_timeout_ms() -> u64 {
    1_000
}
fn default_memory_mib() -> u64 {
    64
}
fn default_permissions() -> String {
    "rw".to_owned()
}

/// Parses a file's text into `T`; TOML syntax errors, unknown keys and
/// wrong types name the file, the line and the key.
pub(super) fn parse<T: serde::de::DeserializeOwned>(
    file: &Path,
    text: &str,
) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        file: file.to_owned(),
        detail: e.to_string().trim_end().to_owned(),
    })
}
