//! What a configuration directory means once validated: the
//! [`ConfigSet`] of [`ResourceConfig`]s, each hook bound to its guest, and
//! the constants of the schema.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use wdp_hardware::{AdminNodeKind, NodeSelector, Selector};
use wdp_policy::Hook;
use wdp_policy::signature::TrustedKeys;

use super::schema::{CdiEdits, CdiMode, HostSettings, OnError, ServingApi};

/// Everything read from a configuration directory.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigSet {
    /// The directory.
    pub dir: PathBuf,
    /// The named configuration set read (`None`: the default set).
    pub set: Option<String>,
    /// SHA-256 over the files read (`host.toml` and the resource files,
    /// with their paths), `sha256:<hex>`: what the metric of the active
    /// set shows, so a fleet's versions can be compared.
    pub digest: String,
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
    /// The SHA-256 the guest file must have (lower-case hex), when pinned.
    pub sha256: Option<String>,
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
    /// `get-preferred-allocation` as the file sets it. Unset, a
    /// device-plugin resource offers `GetPreferredAllocation` when it has
    /// something to add (`Resource::offers_preferred_allocation` in `wdp-resource`).
    pub get_preferred_allocation: Option<bool>,
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
    /// The keys every guest of the resource must be signed by: the host's
    /// and the resource's `[guest-signatures]` together (empty: signatures
    /// not required).
    pub trusted_keys: TrustedKeys,
    /// `grant-admin-nodes`: the administrative node kinds the resource may
    /// hand out (none by default).
    pub admin_grants: BTreeSet<AdminNodeKind>,
    /// How `Allocate` names devices, and whether a CDI spec is written.
    pub cdi: CdiMode,
    /// `[cdi-edits]`: what the CDI spec adds to every container.
    pub cdi_edits: CdiEdits,
    /// Which kubelet API serves the resource.
    pub api: ServingApi,
    /// Whether a DRA resource writes each prepared claim's device metadata
    /// files (KEP-5304) and mounts them into its containers
    /// (`device-metadata`, on by default); `false` on a device-plugin
    /// resource.
    pub device_metadata: bool,
    /// The DRA driver name (a DNS subdomain); set exactly when `api` is
    /// [`ServingApi::Dra`].
    pub driver: Option<String>,
    /// The shortest time between two ResourceSlice write passes of a DRA
    /// resource's pool (`publish-interval-ms`); the default on a
    /// device-plugin resource, which publishes no slices.
    pub publish_interval: Duration,
    /// `[passthrough]`: the kernel driver a DRA resource binds prepared
    /// devices to, when it binds on demand.
    pub passthrough: Option<super::passthrough::Passthrough>,
}

impl ConfigSet {
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
