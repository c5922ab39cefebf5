//! The configuration directory: `host.toml` (optional global settings) plus
//! one `*.toml` file per resource. Parsing refuses unknown keys, and every
//! error names the file, and where TOML can tell, the line and the field.
//!
//! The schema is documented key by key in `docs/config-reference.md`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use wdp_hardware::{NodeSelector, PciSelector, Selector, UsbSelector};
use wdp_policy::Hook;

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

/// Global settings from `host.toml`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostSettings {
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
}

impl Default for HostSettings {
    fn default() -> Self {
        Self {
            version: CONFIG_VERSION,
            hook_defaults: HookDefaults::default(),
            poll_interval_ms: default_poll_ms(),
            reload_debounce_ms: default_debounce_ms(),
            precompiled_cache_dir: None,
        }
    }
}

/// Limits applied to a hook when its resource does not set them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HookDefaults {
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    #[serde(default = "default_memory_mib")]
    pub memory_limit_mib: u64,
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
struct RawResource {
    version: u32,
    resource: String,
    #[serde(default)]
    socket: Option<String>,
    #[serde(default)]
    pre_start_required: Option<bool>,
    #[serde(default = "yes")]
    get_preferred_allocation: bool,
    #[serde(default)]
    poll_interval_ms: Option<u64>,
    #[serde(default = "default_permissions")]
    permissions: String,
    #[serde(default)]
    nodes: Vec<NodeEntry>,
    #[serde(default)]
    pci: Vec<PciSelector>,
    #[serde(default)]
    usb: Vec<UsbSelector>,
    #[serde(default)]
    hooks: RawHooks,
    #[serde(default)]
    guest_config: toml::Table,
    #[serde(default)]
    writable_attributes: Vec<String>,
}

/// `[[nodes]]`: device nodes by path or glob, each match one device.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct NodeEntry {
    /// A host path or glob, e.g. `/dev/fuse` or `/dev/dri/renderD*`.
    path: String,
    /// A literal path that does not exist is an error unless optional.
    #[serde(default)]
    optional: bool,
    #[serde(default)]
    replicas: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawHooks {
    discovery: Option<HookConfig>,
    health: Option<HookConfig>,
    preferred_allocation: Option<HookConfig>,
    allocate: Option<HookConfig>,
    pre_start: Option<HookConfig>,
}

/// `[hooks.<name>]`: the guest that implements one hook and its limits.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HookConfig {
    /// Path of the `.wasm` component, relative to the config directory.
    pub guest: PathBuf,
    pub timeout_ms: Option<u64>,
    pub memory_limit_mib: Option<u64>,
    pub on_error: Option<OnError>,
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

fn default_version() -> u32 {
    CONFIG_VERSION
}
fn default_poll_ms() -> u64 {
    5_000
}
fn default_debounce_ms() -> u64 {
    100
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
fn yes() -> bool {
    true
}

/// Reads and validates a whole configuration directory.
pub fn load_dir(dir: &Path) -> Result<ConfigSet, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ConfigError::Directory {
        dir: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Directory {
            dir: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        // Hidden entries include the `..data` machinery of ConfigMap volumes.
        if name.starts_with('.') || !name.ends_with(".toml") {
            continue;
        }
        files.push(entry.path());
    }
    files.sort();

    let host_path = dir.join(HOST_FILE);
    let host = if files.contains(&host_path) {
        let text = read(&host_path)?;
        let host: HostSettings = parse(&host_path, &text)?;
        check_version(&host_path, host.version)?;
        host
    } else {
        HostSettings::default()
    };

    let mut resources: BTreeMap<String, ResourceConfig> = BTreeMap::new();
    for file in files.iter().filter(|f| **f != host_path) {
        let text = read(file)?;
        let resource = parse_resource(dir, file, &text, &host)?;
        if let Some(other) = resources.get(&resource.resource) {
            return Err(ConfigError::DuplicateResource {
                file: file.clone(),
                other: other.file.clone(),
                resource: resource.resource,
            });
        }
        if let Some(other) = resources.values().find(|r| r.socket == resource.socket) {
            return Err(ConfigError::DuplicateSocket {
                file: file.clone(),
                other: other.file.clone(),
                socket: resource.socket,
            });
        }
        resources.insert(resource.resource.clone(), resource);
    }
    Ok(ConfigSet {
        dir: dir.to_owned(),
        host,
        resources,
    })
}

fn read(file: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(file).map_err(|source| ConfigError::Read {
        file: file.to_owned(),
        source,
    })
}

fn parse<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        file: file.to_owned(),
        detail: e.to_string().trim_end().to_owned(),
    })
}

fn check_version(file: &Path, version: u32) -> Result<(), ConfigError> {
    if version == CONFIG_VERSION {
        Ok(())
    } else {
        Err(invalid(
            file,
            "version",
            format!("this host understands version {CONFIG_VERSION}, the file says {version}"),
        ))
    }
}

fn invalid(file: &Path, field: &str, problem: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        file: file.to_owned(),
        field: field.to_owned(),
        problem: problem.into(),
    }
}

/// Parses one resource file (`dir` resolves relative guest paths).
pub fn parse_resource(
    dir: &Path,
    file: &Path,
    text: &str,
    host: &HostSettings,
) -> Result<ResourceConfig, ConfigError> {
    let raw: RawResource = parse(file, text)?;
    check_version(file, raw.version)?;
    validate_resource_name(&raw.resource).map_err(|p| invalid(file, "resource", p))?;
    let socket = match raw.socket {
        Some(socket) => {
            validate_socket_name(&socket).map_err(|p| invalid(file, "socket", p))?;
            socket
        }
        None => default_socket_name(&raw.resource),
    };
    if raw.permissions.is_empty() || !raw.permissions.chars().all(|c| "rwm".contains(c)) {
        return Err(invalid(
            file,
            "permissions",
            format!(
                "`{}` is not a cgroup permission string (one or more of r, w, m)",
                raw.permissions
            ),
        ));
    }

    let mut selectors = Vec::new();
    let mut replicas = BTreeMap::new();
    for (i, entry) in raw.nodes.into_iter().enumerate() {
        if !entry.path.starts_with('/') {
            return Err(invalid(
                file,
                &format!("nodes[{i}].path"),
                format!(
                    "`{}` must be an absolute host path such as /dev/fuse",
                    entry.path
                ),
            ));
        }
        if let Some(n) = entry.replicas {
            if n == 0 {
                return Err(invalid(
                    file,
                    &format!("nodes[{i}].replicas"),
                    "must be at least 1",
                ));
            }
            replicas.insert(selectors.len(), n);
        }
        selectors.push(Selector::Nodes(NodeSelector {
            path: entry.path,
            optional: entry.optional,
        }));
    }
    let first_pci = selectors.len();
    selectors.extend(raw.pci.into_iter().map(Selector::Pci));
    let first_usb = selectors.len();
    selectors.extend(raw.usb.into_iter().map(Selector::Usb));
    for (i, selector) in selectors.iter().enumerate() {
        if let Err(error) = selector.validate() {
            let field = match selector {
                Selector::Nodes(_) => format!("nodes[{i}]"),
                Selector::Pci(_) => format!("pci[{}]", i - first_pci),
                Selector::Usb(_) => format!("usb[{}]", i - first_usb),
            };
            return Err(invalid(file, &field, error.to_string()));
        }
    }

    let mut hooks = Vec::new();
    let raw_hooks = [
        (Hook::Discovery, raw.hooks.discovery),
        (Hook::Health, raw.hooks.health),
        (Hook::PreferredAllocation, raw.hooks.preferred_allocation),
        (Hook::Allocate, raw.hooks.allocate),
        (Hook::PreStart, raw.hooks.pre_start),
    ];
    for (hook, config) in raw_hooks {
        let Some(config) = config else { continue };
        let field = format!("hooks.{hook}");
        if config.guest.as_os_str().is_empty() {
            return Err(invalid(
                file,
                &format!("{field}.guest"),
                "must name a .wasm component, relative to the config directory or absolute",
            ));
        }
        let timeout_ms = config.timeout_ms.unwrap_or(host.hook_defaults.timeout_ms);
        if timeout_ms == 0 {
            return Err(invalid(
                file,
                &format!("{field}.timeout-ms"),
                "must be above 0",
            ));
        }
        let memory_mib = config
            .memory_limit_mib
            .unwrap_or(host.hook_defaults.memory_limit_mib);
        if !(1..=4096).contains(&memory_mib) {
            return Err(invalid(
                file,
                &format!("{field}.memory-limit-mib"),
                "must be between 1 and 4096",
            ));
        }
        hooks.push(HookBinding {
            hook,
            guest: dir.join(&config.guest),
            timeout: Duration::from_millis(timeout_ms),
            memory_limit_bytes: memory_mib * 1024 * 1024,
            on_error: config.on_error.unwrap_or(host.hook_defaults.on_error),
        });
    }
    if selectors.is_empty() && !hooks.iter().any(|h| h.hook == Hook::Discovery) {
        return Err(invalid(
            file,
            "nodes",
            "the resource selects no hardware: add [[nodes]], [[pci]] or [[usb]] entries",
        ));
    }
    let has_pre_start_guest = hooks.iter().any(|h| h.hook == Hook::PreStart);
    let pre_start_required = raw.pre_start_required.unwrap_or(has_pre_start_guest);

    Ok(ResourceConfig {
        file: file.to_owned(),
        resource: raw.resource,
        socket,
        pre_start_required,
        get_preferred_allocation: raw.get_preferred_allocation,
        poll_interval: Duration::from_millis(
            raw.poll_interval_ms
                .unwrap_or(host.poll_interval_ms)
                .max(10),
        ),
        permissions: raw.permissions,
        selectors,
        replicas,
        hooks,
        guest_config: flatten_table(&raw.guest_config),
        writable_attributes: raw.writable_attributes,
    })
}

/// Renders a TOML table as `key = value` strings; nested tables become
/// dotted keys, strings lose their quotes, other values keep TOML syntax.
fn flatten_table(table: &toml::Table) -> Vec<(String, String)> {
    fn walk(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>) {
        for (key, value) in table {
            let key = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                toml::Value::Table(inner) => walk(&key, inner, out),
                toml::Value::String(s) => out.push((key, s.clone())),
                other => out.push((key, other.to_string())),
            }
        }
    }
    let mut out = Vec::new();
    walk("", table, &mut out);
    out
}

/// Checks `domain/name` the way the kubelet's `IsExtendedResourceName` does:
/// a DNS subdomain prefix that is not `kubernetes.io`, and a qualified name.
pub fn validate_resource_name(name: &str) -> Result<(), String> {
    let Some((domain, local)) = name.split_once('/') else {
        return Err(format!(
            "`{name}` is not an extended resource name: expected `domain/name`, e.g. example.com/fuse"
        ));
    };
    if domain == "kubernetes.io" || domain.ends_with(".kubernetes.io") {
        return Err(format!(
            "`{name}`: the kubernetes.io domain is reserved for Kubernetes itself"
        ));
    }
    if domain.starts_with("requests.") {
        return Err(format!(
            "`{name}`: names starting with `requests.` are refused by quota"
        ));
    }
    if domain.is_empty() || domain.len() > 253 {
        return Err(format!(
            "`{name}`: the domain must have 1 to 253 characters"
        ));
    }
    for label in domain.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "`{name}`: domain `{domain}` is not a DNS subdomain (lowercase letters, digits, '-' and '.')"
            ));
        }
    }
    let local_ok = !local.is_empty()
        && local.len() <= 63
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && local.starts_with(|c: char| c.is_ascii_alphanumeric())
        && local.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !local_ok {
        return Err(format!(
            "`{name}`: `{local}` must be 1 to 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric"
        ));
    }
    Ok(())
}

fn validate_socket_name(socket: &str) -> Result<(), String> {
    if socket.is_empty()
        || socket.contains('/')
        || socket.starts_with('.')
        || socket == wdp_kubelet_api::v1beta1::KUBELET_SOCKET
    {
        return Err(format!(
            "`{socket}` must be a plain file name inside the device-plugin directory (not kubelet.sock)"
        ));
    }
    Ok(())
}

/// `example.com/fuse` → `wdp-example.com-fuse.sock`.
pub fn default_socket_name(resource: &str) -> String {
    format!("wdp-{}.sock", resource.replace('/', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<ResourceConfig, ConfigError> {
        parse_resource(
            Path::new("/cfg"),
            Path::new("/cfg/r.toml"),
            text,
            &HostSettings::default(),
        )
    }

    #[test]
    fn minimal_resource_gets_defaults() {
        let r = parse_text("version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\nreplicas = 4\n").unwrap();
        assert_eq!(r.socket, "wdp-example.com-fuse.sock");
        assert!(!r.pre_start_required);
        assert!(r.get_preferred_allocation);
        assert_eq!(r.replicas.get(&0), Some(&4));
        assert_eq!(r.permissions, "rw");
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let err = parse_text("version = 1\nresource = \"example.com/fuse\"\nreplica = 3\n[[nodes]]\npath = \"/dev/fuse\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("/cfg/r.toml"), "{err}");
        assert!(err.contains("replica"), "{err}");
        assert!(err.contains("line 3"), "{err}");
    }

    #[test]
    fn reserved_and_malformed_resource_names_are_refused() {
        for bad in [
            "fuse",
            "kubernetes.io/fuse",
            "Example.com/fuse",
            "example.com/",
            "example.com/-x",
        ] {
            let err = parse_text(&format!(
                "version = 1\nresource = \"{bad}\"\n[[nodes]]\npath = \"/dev/fuse\"\n"
            ))
            .unwrap_err()
            .to_string();
            assert!(err.contains("field `resource`"), "{bad}: {err}");
        }
        assert!(validate_resource_name("nvidia.com/gpu").is_ok());
    }

    #[test]
    fn wrong_version_and_relative_paths_are_refused() {
        let err = parse_text(
            "version = 2\nresource = \"example.com/a\"\n[[nodes]]\npath = \"/dev/fuse\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("field `version`"), "{err}");
        let err = parse_text(
            "version = 1\nresource = \"example.com/a\"\n[[nodes]]\npath = \"dev/fuse\"\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("nodes[0].path"), "{err}");
    }

    #[test]
    fn hooks_resolve_against_defaults_and_enable_pre_start() {
        let r = parse_text(
            "version = 1\nresource = \"example.com/a\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.pre-start]\nguest = \"guests/p.wasm\"\ntimeout-ms = 20\n[guest-config]\nmode = \"strict\"\nlimit = 3\n",
        )
        .unwrap();
        let b = r.hook(Hook::PreStart).unwrap();
        assert_eq!(b.guest, Path::new("/cfg/guests/p.wasm"));
        assert_eq!(b.timeout, Duration::from_millis(20));
        assert_eq!(b.memory_limit_bytes, 64 << 20);
        assert!(r.pre_start_required);
        assert_eq!(
            r.guest_config,
            vec![
                ("limit".into(), "3".into()),
                ("mode".into(), "strict".into())
            ]
        );
    }
}
