//! Validation of one parsed resource file: names, paths, counts and limits
//! are checked and resolved against the host defaults into a
//! [`ResourceConfig`]. Every refusal names the file and the field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use wdp_hardware::{AdminNodeKind, NodeSelector, PciSelector, Selector, UsbSelector};
use wdp_policy::Hook;
use wdp_policy::signature::{TrustedKey, TrustedKeys};

use super::error::ConfigError;
use super::model::{HookBinding, ResourceConfig};
use super::schema::{
    CONFIG_VERSION, CdiEdits, CdiMode, CompanionEntry, HOST_FILE, HostSettings, NodeEntry,
    RawHooks, RawResource, ServingApi, parse,
};
use super::serving::{check_serving_api, device_metadata, publish_interval};
use super::socket::{default_socket_name, validate_socket_name};
use crate::limits::MAX_DEVICES_PER_RESOURCE;

/// Hooks that run only on a resource served through DRA (WIT 0.1.2 and
/// 0.1.3). A `device-taints` guest may export `device-taints-v2` instead
/// (the resource binds it under `device-taints` all the same).
fn is_dra_only(hook: Hook) -> bool {
    matches!(
        hook,
        Hook::DraLayout
            | Hook::DraPrepare
            | Hook::DraUnprepare
            | Hook::DeviceTaints
            | Hook::DeviceTaintsV2
            | Hook::Passthrough
    )
}

pub(super) fn check_version(file: &Path, version: u32) -> Result<(), ConfigError> {
    if version == CONFIG_VERSION {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            file,
            "version",
            format!("this host understands version {CONFIG_VERSION}, the file says {version}"),
        ))
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
    validate_resource_name(&raw.resource).map_err(|p| ConfigError::invalid(file, "resource", p))?;
    let driver = check_serving_api(file, &raw)?;
    let publish_interval = publish_interval(file, &raw)?;
    let passthrough = super::passthrough::passthrough(file, &raw)?;
    let socket = socket_name(file, &raw)?;
    let device_metadata = device_metadata(file, &raw)?;
    if raw.permissions.is_empty() || !raw.permissions.chars().all(|c| "rwm".contains(c)) {
        return Err(ConfigError::invalid(
            file,
            "permissions",
            format!(
                "`{}` is not a cgroup permission string (one or more of r, w, m)",
                raw.permissions
            ),
        ));
    }

    let (selectors, replicas, companions) =
        parse_selectors(file, raw.nodes, raw.companion_nodes, raw.pci, raw.usb)?;

    let hooks = hook_bindings(dir, file, host, raw.hooks, raw.api)?;
    if passthrough.is_none() && hooks.iter().any(|h| h.hook == Hook::Passthrough) {
        return Err(ConfigError::invalid(
            file,
            "hooks.passthrough",
            "the passthrough hook is asked before the host binds a claim's devices to the resource's bind-driver, and this resource binds nothing: add a [passthrough] table with bind-driver",
        ));
    }
    if selectors.is_empty() && !hooks.iter().any(|h| h.hook == Hook::Discovery) {
        return Err(ConfigError::invalid(
            file,
            "nodes",
            "the resource selects no hardware: add [[nodes]], [[pci]] or [[usb]] entries",
        ));
    }
    if raw.cdi != CdiMode::Off {
        wdp_cdi::names::check_kind(&raw.resource)
            .map_err(|p| ConfigError::invalid(file, "resource", p))?;
    }
    validate_cdi_edits(&raw.cdi_edits)
        .map_err(|(field, p)| ConfigError::invalid(file, &field, p))?;
    let trusted_keys = trusted_keys(dir, file, host, &raw.guest_signatures.trusted_keys)?;
    let admin_grants = admin_grants(&raw.grant_admin_nodes)
        .map_err(|p| ConfigError::invalid(file, "grant-admin-nodes", p))?;
    let has_pre_start_guest = hooks.iter().any(|h| h.hook == Hook::PreStart);
    let pre_start_required = raw.pre_start_required.unwrap_or(has_pre_start_guest);
    let get_preferred_allocation = raw.get_preferred_allocation;

    Ok(ResourceConfig {
        file: file.to_owned(),
        resource: raw.resource,
        socket,
        pre_start_required,
        get_preferred_allocation,
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
        companions,
        trusted_keys,
        admin_grants,
        cdi: raw.cdi,
        cdi_edits: raw.cdi_edits,
        device_metadata,
        api: raw.api,
        driver,
        publish_interval,
        passthrough,
    })
}

/// The device-plugin socket's file name: the `socket` key, or the default
/// derived from the resource name; none for a DRA resource.
fn socket_name(file: &Path, raw: &RawResource) -> Result<String, ConfigError> {
    Ok(match &raw.socket {
        // A DRA resource has no device-plugin socket.
        _ if raw.api == ServingApi::Dra => String::new(),
        Some(socket) => {
            validate_socket_name(socket).map_err(|p| ConfigError::invalid(file, "socket", p))?;
            socket.clone()
        }
        None => {
            let socket = default_socket_name(&raw.resource);
            validate_socket_name(&socket).map_err(|p| {
                ConfigError::invalid(
                    file,
                    "socket",
                    format!("the default socket name, derived from `resource`: {p}; set `socket` to a shorter name"),
                )
            })?;
            socket
        }
    })
}

/// What a resource file selects: its selectors, each one's replica count
/// by position, and its companion nodes.
type Selection = (Vec<Selector>, BTreeMap<usize, u32>, Vec<NodeSelector>);

/// The hardware selectors (`[[nodes]]`, `[[pci]]`, `[[usb]]`, in that
/// order), each selector's replica count by position, and the companion
/// nodes; every path absolute and every selector valid.
fn parse_selectors(
    file: &Path,
    nodes: Vec<NodeEntry>,
    companion_nodes: Vec<CompanionEntry>,
    pci: Vec<PciSelector>,
    usb: Vec<UsbSelector>,
) -> Result<Selection, ConfigError> {
    let mut selectors = Vec::new();
    let mut replicas = BTreeMap::new();
    for (i, entry) in nodes.into_iter().enumerate() {
        if !entry.path.starts_with('/') {
            return Err(ConfigError::invalid(
                file,
                &format!("nodes[{i}].path"),
                format!(
                    "`{}` must be an absolute host path such as /dev/fuse",
                    entry.path
                ),
            ));
        }
        if let Some(n) = entry.replicas {
            let n = validate_replicas(n)
                .map_err(|p| ConfigError::invalid(file, &format!("nodes[{i}].replicas"), p))?;
            replicas.insert(selectors.len(), n);
        }
        selectors.push(Selector::Nodes(NodeSelector {
            path: entry.path,
            optional: entry.optional,
        }));
    }
    let mut companions = Vec::new();
    for (i, entry) in companion_nodes.into_iter().enumerate() {
        let companion = NodeSelector {
            path: entry.path,
            optional: entry.optional,
        };
        let field = format!("companion-nodes[{i}].path");
        if !companion.path.starts_with('/') {
            return Err(ConfigError::invalid(
                file,
                &field,
                format!(
                    "`{}` must be an absolute host path such as /dev/nvidiactl",
                    companion.path
                ),
            ));
        }
        Selector::Nodes(companion.clone())
            .validate()
            .map_err(|e| ConfigError::invalid(file, &field, e.to_string()))?;
        companions.push(companion);
    }
    let first_pci = selectors.len();
    selectors.extend(pci.into_iter().map(Selector::Pci));
    let first_usb = selectors.len();
    selectors.extend(usb.into_iter().map(Selector::Usb));
    for (i, selector) in selectors.iter().enumerate() {
        if let Err(error) = selector.validate() {
            let field = match selector {
                Selector::Nodes(_) => format!("nodes[{i}]"),
                Selector::Pci(_) => format!("pci[{}]", i - first_pci),
                Selector::Usb(_) => format!("usb[{}]", i - first_usb),
            };
            return Err(ConfigError::invalid(file, &field, error.to_string()));
        }
    }
    Ok((selectors, replicas, companions))
}

/// The hooks bound to guests, limits resolved against `host`'s defaults
/// (guest paths relative to `dir`); a DRA-only hook on a device-plugin
/// resource refused.
fn hook_bindings(
    dir: &Path,
    file: &Path,
    host: &HostSettings,
    raw: RawHooks,
    api: ServingApi,
) -> Result<Vec<HookBinding>, ConfigError> {
    let mut hooks = Vec::new();
    let raw_hooks = [
        (Hook::Discovery, raw.discovery),
        (Hook::Health, raw.health),
        (Hook::PreferredAllocation, raw.preferred_allocation),
        (Hook::Allocate, raw.allocate),
        (Hook::PreStart, raw.pre_start),
        (Hook::DraLayout, raw.dra_layout),
        (Hook::DraPrepare, raw.dra_prepare),
        (Hook::DraUnprepare, raw.dra_unprepare),
        (Hook::DeviceTaints, raw.device_taints),
        (Hook::Passthrough, raw.passthrough),
    ];
    for (hook, config) in raw_hooks {
        let Some(config) = config else { continue };
        let field = format!("hooks.{hook}");
        if is_dra_only(hook) && api != ServingApi::Dra {
            return Err(ConfigError::invalid(
                file,
                &field,
                format!(
                    "the {hook} hook runs only on a resource served through DRA (api = \"dra\")"
                ),
            ));
        }
        if config.guest.as_os_str().is_empty() {
            return Err(ConfigError::invalid(
                file,
                &format!("{field}.guest"),
                "must name a .wasm component, relative to the config directory or absolute",
            ));
        }
        let sha256 = match &config.sha256 {
            None => None,
            Some(pin) => Some(
                parse_sha256(pin)
                    .map_err(|p| ConfigError::invalid(file, &format!("{field}.sha256"), p))?,
            ),
        };
        let timeout_ms = config.timeout_ms.unwrap_or(host.hook_defaults.timeout_ms);
        if timeout_ms == 0 {
            return Err(ConfigError::invalid(
                file,
                &format!("{field}.timeout-ms"),
                "must be above 0",
            ));
        }
        let memory_mib = config
            .memory_limit_mib
            .unwrap_or(host.hook_defaults.memory_limit_mib);
        if !(1..=4096).contains(&memory_mib) {
            return Err(ConfigError::invalid(
                file,
                &format!("{field}.memory-limit-mib"),
                "must be between 1 and 4096",
            ));
        }
        hooks.push(HookBinding {
            hook,
            guest: dir.join(&config.guest),
            sha256,
            timeout: Duration::from_millis(timeout_ms),
            memory_limit_bytes: memory_mib * 1024 * 1024,
            on_error: config.on_error.unwrap_or(host.hook_defaults.on_error),
        });
    }
    Ok(hooks)
}

/// A `replicas` count: at least 1, and at most
/// [`MAX_DEVICES_PER_RESOURCE`], since even one matched node shared more
/// times than that cannot fit the kubelet's message limit.
/// The keys a resource's guests must be signed by: `host.toml`'s
/// `[guest-signatures]`, then the resource file's own. A key that cannot be
/// read is refused naming the file that lists it and the entry.
fn trusted_keys(
    dir: &Path,
    file: &Path,
    host: &HostSettings,
    own: &[std::path::PathBuf],
) -> Result<TrustedKeys, ConfigError> {
    let host_file = dir.join(HOST_FILE);
    let listed = host
        .guest_signatures
        .trusted_keys
        .iter()
        .enumerate()
        .map(|(i, key)| (host_file.as_path(), i, key))
        .chain(own.iter().enumerate().map(|(i, key)| (file, i, key)));
    let mut keys = Vec::new();
    for (listing, i, key) in listed {
        let key = TrustedKey::read(&dir.join(key)).map_err(|e| {
            ConfigError::invalid(
                listing,
                &format!("guest-signatures.trusted-keys[{i}]"),
                e.to_string(),
            )
        })?;
        keys.push(key);
    }
    Ok(TrustedKeys::new(keys))
}

/// `grant-admin-nodes`: each a known administrative node kind, by name.
fn admin_grants(names: &[String]) -> Result<BTreeSet<AdminNodeKind>, String> {
    names
        .iter()
        .map(|name| {
            AdminNodeKind::from_name(name).ok_or_else(|| {
                let known: Vec<&str> = AdminNodeKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "`{name}` is not an administrative node kind; the kinds are {}",
                    known.join(", ")
                )
            })
        })
        .collect()
}

/// A guest's digest pin: 64 hexadecimal digits (a `sha256:` prefix, as
/// OCI tools print digests, is accepted), returned in lower case.
fn parse_sha256(pin: &str) -> Result<String, String> {
    let hex = pin.strip_prefix("sha256:").unwrap_or(pin);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{pin:?} is not a SHA-256 digest: it must be 64 hexadecimal digits \
             (`check` and `test` print each guest's)"
        ));
    }
    Ok(hex.to_ascii_lowercase())
}

fn validate_replicas(n: i64) -> Result<u32, String> {
    if n < 1 {
        return Err(format!("{n}: must be at least 1"));
    }
    match usize::try_from(n) {
        Ok(n) if n <= MAX_DEVICES_PER_RESOURCE => {
            u32::try_from(n).map_err(|_| format!("{n}: too large"))
        }
        _ => Err(format!(
            "{n} is above {MAX_DEVICES_PER_RESOURCE}, the most devices one resource may \
             advertise (more cannot fit the kubelet's {} MiB ListAndWatch message)",
            crate::limits::KUBELET_MAX_MESSAGE_BYTES / (1024 * 1024)
        )),
    }
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

/// `[cdi-edits]`: `NAME=value` environment entries, absolute paths, and
/// hook names the CDI spec knows.
fn validate_cdi_edits(edits: &CdiEdits) -> Result<(), (String, String)> {
    for (i, entry) in edits.env.iter().enumerate() {
        if entry
            .split_once('=')
            .is_none_or(|(name, _)| name.is_empty())
        {
            return Err((
                format!("cdi-edits.env[{i}]"),
                format!("`{entry}` is not NAME=value"),
            ));
        }
    }
    for (i, mount) in edits.mounts.iter().enumerate() {
        for (key, path) in [
            ("host-path", &mount.host_path),
            ("container-path", &mount.container_path),
        ] {
            if !path.starts_with('/') {
                return Err((
                    format!("cdi-edits.mounts[{i}].{key}"),
                    format!("`{path}` must be an absolute path"),
                ));
            }
        }
    }
    for (i, hook) in edits.hooks.iter().enumerate() {
        if !wdp_cdi::names::HOOK_NAMES.contains(&hook.hook_name.as_str()) {
            return Err((
                format!("cdi-edits.hooks[{i}].hook-name"),
                format!(
                    "`{}` is not one of {}",
                    hook.hook_name,
                    wdp_cdi::names::HOOK_NAMES.join(", ")
                ),
            ));
        }
        if !hook.path.starts_with('/') {
            return Err((
                format!("cdi-edits.hooks[{i}].path"),
                format!("`{}` must be an absolute path", hook.path),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
