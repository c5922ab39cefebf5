//! The Rust guest SDK for wasm-device-plugin policy guests.
//!
//! A policy guest is a WebAssembly component (target `wasm32-wasip2`, crate
//! type `cdylib`) that exports one or more of the hook interfaces of the
//! WIT package `wasm-device-plugin:policy@0.1.3` (`wit/policy.wit` at the
//! root of the repository): `discovery`, `health`, `preferred-allocation`,
//! `allocate` and `pre-start`, and, for resources served through Dynamic
//! Resource Allocation (added in 0.1.2), `dra-layout`, `dra-prepare` with
//! `dra-unprepare`, and `device-taints`, and (added in 0.1.3)
//! `device-taints-v2` (the `none` effect, up to 16 taints a device) and
//! `passthrough` (a say before devices are bound to another kernel
//! driver). This crate runs
//! `wit_bindgen::generate!` over that package once, re-exports the types
//! under short names, and offers one trait per hook and one export macro
//! per hook world, so a guest implements only the hooks it wants:
//!
//! ```ignore
//! use wdp_guest_sdk::{Health, DeviceFacts, Verdict};
//!
//! struct Policy;
//!
//! impl Health for Policy {
//!     fn check(devices: Vec<DeviceFacts>) -> Result<Vec<Verdict>, String> {
//!         wdp_guest_sdk::info!("checking {} devices", devices.len());
//!         Ok(Vec::new()) // keep the built-in verdicts
//!     }
//! }
//!
//! wdp_guest_sdk::export_health!(Policy);
//! ```
//!
//! A guest that implements several hooks implements several traits on one
//! type (or on several types) and invokes one export macro per hook.
//!
//! | hook | trait | macro |
//! |---|---|---|
//! | `discovery` | [`Discovery`] | [`export_discovery!`] |
//! | `health` | [`Health`] | [`export_health!`] |
//! | `preferred-allocation` | [`PreferredAllocation`] | [`export_preferred_allocation!`] |
//! | `allocate` | [`Allocate`] | [`export_allocate!`] |
//! | `pre-start` | [`PreStart`] | [`export_pre_start!`] |
//! | `dra-layout` | [`DraLayout`] | [`export_dra_layout!`] |
//! | `dra-prepare`, `dra-unprepare` | [`DraPrepare`], [`DraUnprepare`] | [`export_dra_prepare!`] (both) |
//! | `device-taints` | [`DeviceTaints`] | [`export_device_taints!`] |
//! | `device-taints-v2` | [`DeviceTaintsV2`] | [`export_device_taints_v2!`] |
//! | `passthrough` | [`Passthrough`] | [`export_passthrough!`] |
//!
//! Host services ([`host`], [`hardware`] and [`claim`] imports) are
//! available to every hook: [`config()`] returns the guest's `[guest-config]` table as a
//! [`Config`], the logging macros ([`info!`], [`warn!`], ...) write into the
//! host's log tagged with the guest and hook, and [`hardware::candidates`],
//! [`hardware::read_attribute`] and [`hardware::write_attribute`] reach the
//! hardware the resource selected (and nothing else), and
//! [`current_claim()`] tells a `dra-prepare`, `dra-unprepare`, `allocate`
//! or `pre-start` guest of a DRA resource which claim it prepares and hands
//! it the claim's opaque configuration for the driver, and
//! [`claim_devices()`] (WIT 0.1.2) the claim's devices of the driver.
//!
//! Discovery and health calls run in a fresh instance; allocation,
//! allocate and pre-start calls may run in an instance kept warm from an
//! earlier call of the same device-set generation (state may persist
//! between those calls, but never across generations or resources). For
//! large device sets implement [`PreferredAllocationByIndex`] and export it
//! with [`export_preferred_allocation_by_index!`]: the host then sends the
//! device table once per generation and only positions per call.
//!
//! Guests run under a deadline and a memory cap, without any filesystem,
//! network, environment or clock beyond what the imports give. A panic
//! becomes a trap that fails only the current call; returning `Err(message)`
//! is the polite way to fail and the message reaches the host's log.

#![warn(missing_docs)]

extern crate self as wdp_guest_sdk;

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;
}

/// Bindings for the imports every guest may use (generated).
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        inline: "
            package wdp:guest-sdk;
            world imports {
                import wasm-device-plugin:policy/host@0.1.3;
                import wasm-device-plugin:policy/hardware@0.1.3;
                import wasm-device-plugin:policy/types@0.1.3;
                import wasm-device-plugin:policy/claim@0.1.3;
            }
        ",
        path: "../../wit",
        world: "wdp:guest-sdk/imports",
        generate_all,
        generate_unused_types: true,
        runtime_path: "::wdp_guest_sdk::__private::wit_bindgen::rt",
    });
}

macro_rules! hook_world {
    ($module:ident, $world:literal, $macro_name:literal, $default_module:literal) => {
        hook_world!($module, $world, $macro_name, $default_module, {});
    };
    ($module:ident, $world:literal, $macro_name:literal, $default_module:literal, with_claim) => {
        hook_world!($module, $world, $macro_name, $default_module, {
            "wasm-device-plugin:policy/claim@0.1.3": crate::bindings::wasm_device_plugin::policy::claim,
        });
    };
    ($module:ident, $world:literal, $macro_name:literal, $default_module:literal, { $($extra:tt)* }) => {
        /// Bindings for one hook world (generated).
        #[allow(missing_docs)]
        #[doc(hidden)]
        pub mod $module {
            wit_bindgen::generate!({
                path: "../../wit",
                world: $world,
                with: {
                    "wasm-device-plugin:policy/types@0.1.3": crate::bindings::wasm_device_plugin::policy::types,
                    "wasm-device-plugin:policy/host@0.1.3": crate::bindings::wasm_device_plugin::policy::host,
                    "wasm-device-plugin:policy/hardware@0.1.3": crate::bindings::wasm_device_plugin::policy::hardware,
                    $($extra)*
                },
                pub_export_macro: true,
                export_macro_name: $macro_name,
                default_bindings_module: $default_module,
                runtime_path: "::wdp_guest_sdk::__private::wit_bindgen::rt",
            });
        }
    };
}

hook_world!(
    discovery_world,
    "wasm-device-plugin:policy/discovery-guest@0.1.3",
    "export_discovery",
    "::wdp_guest_sdk::discovery_world"
);
hook_world!(
    health_world,
    "wasm-device-plugin:policy/health-guest@0.1.3",
    "export_health",
    "::wdp_guest_sdk::health_world"
);
hook_world!(
    preferred_allocation_world,
    "wasm-device-plugin:policy/preferred-allocation-guest@0.1.3",
    "export_preferred_allocation",
    "::wdp_guest_sdk::preferred_allocation_world"
);
/// Bindings for `preferred-allocation-indexed` alone (generated): the plain
/// `preferred-allocation` export beside it comes from its own world, since
/// one crate cannot generate the same export twice.
#[allow(missing_docs)]
#[doc(hidden)]
pub mod preferred_allocation_indexed_world {
    wit_bindgen::generate!({
        inline: "
            package wdp:guest-sdk-indexed;
            world indexed {
                import wasm-device-plugin:policy/host@0.1.3;
                import wasm-device-plugin:policy/hardware@0.1.3;
                export wasm-device-plugin:policy/preferred-allocation-indexed@0.1.3;
            }
        ",
        path: "../../wit",
        world: "wdp:guest-sdk-indexed/indexed",
        with: {
            "wasm-device-plugin:policy/types@0.1.3": crate::bindings::wasm_device_plugin::policy::types,
            "wasm-device-plugin:policy/host@0.1.3": crate::bindings::wasm_device_plugin::policy::host,
            "wasm-device-plugin:policy/hardware@0.1.3": crate::bindings::wasm_device_plugin::policy::hardware,
        },
        pub_export_macro: true,
        export_macro_name: "__export_preferred_allocation_indexed",
        default_bindings_module: "::wdp_guest_sdk::preferred_allocation_indexed_world",
        runtime_path: "::wdp_guest_sdk::__private::wit_bindgen::rt",
    });
}
hook_world!(
    allocate_world,
    "wasm-device-plugin:policy/allocate-guest@0.1.3",
    "export_allocate",
    "::wdp_guest_sdk::allocate_world",
    with_claim
);
hook_world!(
    pre_start_world,
    "wasm-device-plugin:policy/pre-start-guest@0.1.3",
    "export_pre_start",
    "::wdp_guest_sdk::pre_start_world",
    with_claim
);
hook_world!(
    dra_layout_world,
    "wasm-device-plugin:policy/dra-layout-guest@0.1.3",
    "export_dra_layout",
    "::wdp_guest_sdk::dra_layout_world"
);
hook_world!(
    dra_prepare_world,
    "wasm-device-plugin:policy/dra-prepare-guest@0.1.3",
    "export_dra_prepare",
    "::wdp_guest_sdk::dra_prepare_world",
    with_claim
);
// `device-taints` takes `health.device-facts`: the type comes from the
// `health` bindings above, so both hooks share one `DeviceFacts`.
hook_world!(
    device_taints_world,
    "wasm-device-plugin:policy/device-taints-guest@0.1.3",
    "export_device_taints",
    "::wdp_guest_sdk::device_taints_world",
    {
        "wasm-device-plugin:policy/health@0.1.3": crate::health_world::exports::wasm_device_plugin::policy::health,
    }
);
// `device-taints-v2` (WIT 0.1.3) shares `health.device-facts` the same way.
hook_world!(
    device_taints_v2_world,
    "wasm-device-plugin:policy/device-taints-v2-guest@0.1.3",
    "export_device_taints_v2",
    "::wdp_guest_sdk::device_taints_v2_world",
    {
        "wasm-device-plugin:policy/health@0.1.3": crate::health_world::exports::wasm_device_plugin::policy::health,
    }
);
hook_world!(
    passthrough_world,
    "wasm-device-plugin:policy/passthrough-guest@0.1.3",
    "export_passthrough",
    "::wdp_guest_sdk::passthrough_world"
);

pub use bindings::wasm_device_plugin::policy::{claim, hardware, host};

/// The data types shared by every hook.
pub use bindings::wasm_device_plugin::policy::types::{
    Candidate, CandidateKind, Device, DeviceNode, DeviceRef, NodeType,
};
/// The data types of the DRA hooks (WIT 0.1.2): a claim's devices, what a
/// prepared device reports, device taints.
pub use bindings::wasm_device_plugin::policy::types::{
    ClaimDevice, DeviceCondition, DeviceStatus, DeviceTaint, NetworkData, Quantity, TaintEffect,
};
pub use host::LogLevel;

/// The DRA claim a `dra-prepare`, `dra-unprepare`, `allocate` or
/// `pre-start` call serves (WIT 0.1.1).
pub use claim::ClaimInfo;

/// The ResourceClaim being prepared when the resource is served through
/// Dynamic Resource Allocation: its namespace, name, UID, the requests this
/// driver serves and the `parameters` of every opaque configuration for
/// this driver, as JSON text in allocation order (class configuration
/// first, then the claim's own). `None` on device-plugin calls and in the
/// hooks that run outside a prepare (discovery, health).
///
/// ```ignore
/// if let Some(claim) = wdp_guest_sdk::current_claim() {
///     for parameters in &claim.configs {
///         wdp_guest_sdk::info!("claim {} config {parameters}", claim.name);
///     }
/// }
/// ```
pub fn current_claim() -> Option<ClaimInfo> {
    claim::current()
}

/// The devices of this driver in the claim being prepared, in allocation
/// order: each with the request it serves, whether it is a partition
/// (and of which advertised device), admin access and the capacity it
/// consumes (WIT 0.1.2). Empty outside a DRA prepare. `dra-prepare` and
/// `dra-unprepare` get the same list as their argument; `allocate` and
/// `pre-start` reach it here.
///
/// ```ignore
/// for device in wdp_guest_sdk::claim_devices() {
///     wdp_guest_sdk::info!("{} serves request {}", device.id, device.request);
/// }
/// ```
pub fn claim_devices() -> Vec<ClaimDevice> {
    claim::devices()
}

/// The `discovery` hook: candidates in, devices to advertise out.
pub use discovery_world::exports::wasm_device_plugin::policy::discovery::Guest as Discovery;

/// The `health` hook: devices with fresh facts in, verdicts out.
pub use health_world::exports::wasm_device_plugin::policy::health::{
    DeviceFacts, Guest as Health, Verdict,
};

/// The `preferred-allocation` hook: available devices, must-include and size
/// in, the chosen IDs out.
pub use preferred_allocation_world::exports::wasm_device_plugin::policy::preferred_allocation::{
    Guest as PreferredAllocation, Request as PreferredRequest,
};

/// The `allocate` hook: one container's devices and the default response
/// in, the container's response out.
pub use allocate_world::exports::wasm_device_plugin::policy::allocate::{
    ContainerResponse, DeviceSpec, Guest as Allocate, Mount,
};

/// The `pre-start` hook: one container's devices in, ok or an error out.
pub use pre_start_world::exports::wasm_device_plugin::policy::pre_start::Guest as PreStart;

/// The `dra-layout` hook (WIT 0.1.2): the advertised devices in, their DRA
/// layout out: counter sets, what each device and partition consumes of
/// them, capacities.
pub use dra_layout_world::exports::wasm_device_plugin::policy::dra_layout::{
    Capacity, CapacityRange, Counter, CounterConsumption, CounterSet, DeviceLayout,
    Guest as DraLayout, Layout, Partition, RequestPolicy,
};

/// The `dra-prepare` hook (WIT 0.1.2): a claim's devices in, their status
/// out. Exported together with [`DraUnprepare`] by [`export_dra_prepare!`].
pub use dra_prepare_world::exports::wasm_device_plugin::policy::dra_prepare::Guest as DraPrepare;

/// The `dra-unprepare` hook (WIT 0.1.2): a claim's devices in, ok or an
/// error out; undoes [`DraPrepare`], succeeding when nothing exists.
pub use dra_prepare_world::exports::wasm_device_plugin::policy::dra_unprepare::Guest as DraUnprepare;

/// The `device-taints` hook (WIT 0.1.2): devices with fresh facts in, the
/// taints of (some of) them out.
pub use device_taints_world::exports::wasm_device_plugin::policy::device_taints::{
    Guest as DeviceTaints, Tainted,
};

/// The `device-taints-v2` hook (WIT 0.1.3): devices with fresh facts in,
/// the taints of (some of) them out, with the `none` effect and up to 16
/// taints a device (Kubernetes 1.35+; 4 on 1.34). Asked instead of
/// `device-taints` when a guest exports both.
pub use device_taints_v2_world::exports::wasm_device_plugin::policy::device_taints_v2::{
    DeviceTaint as DeviceTaintV2, Guest as DeviceTaintsV2, TaintEffect as TaintEffectV2,
    Tainted as TaintedV2,
};

/// The `passthrough` hook (WIT 0.1.3): a bind of a device's IOMMU group to
/// another kernel driver in, ok or the reason not to out.
pub use passthrough_world::exports::wasm_device_plugin::policy::passthrough::{
    BindRequest, Guest as Passthrough, PciFunction,
};

/// Exports a type implementing [`Allocate`] as the guest's `allocate` hook.
pub use allocate_world::export_allocate;
/// Exports a type implementing [`DeviceTaintsV2`] as the guest's
/// `device-taints-v2` hook.
pub use device_taints_v2_world::export_device_taints_v2;
/// Exports a type implementing [`DeviceTaints`] as the guest's
/// `device-taints` hook.
pub use device_taints_world::export_device_taints;
/// Exports a type implementing [`Discovery`] as the guest's `discovery` hook.
pub use discovery_world::export_discovery;
/// Exports a type implementing [`DraLayout`] as the guest's `dra-layout`
/// hook.
pub use dra_layout_world::export_dra_layout;
/// Exports a type implementing both [`DraPrepare`] and [`DraUnprepare`] as
/// the guest's `dra-prepare` and `dra-unprepare` hooks (the host calls
/// `dra-unprepare` to undo a prepare that failed, so they come together).
pub use dra_prepare_world::export_dra_prepare;
/// Exports a type implementing [`Health`] as the guest's `health` hook.
pub use health_world::export_health;
/// Exports a type implementing [`Passthrough`] as the guest's
/// `passthrough` hook.
pub use passthrough_world::export_passthrough;
/// Exports a type implementing [`PreStart`] as the guest's `pre-start` hook.
pub use pre_start_world::export_pre_start;
/// Exports a type implementing [`PreferredAllocation`] as the guest's
/// `preferred-allocation` hook.
pub use preferred_allocation_world::export_preferred_allocation;

pub mod by_index;
pub use by_index::PreferredAllocationByIndex;

/// Looks up an attribute by name in a list of `(name, value)` pairs (the
/// `attributes` of a candidate, device or device reference). The first
/// match wins.
pub fn attr<'a>(attributes: &'a [(String, String)], name: &str) -> Option<&'a str> {
    attributes
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Splits a comma-separated list, trimming blanks and dropping empty items:
/// `"0x10de, 0x1002,"` gives `["0x10de", "0x1002"]`.
pub fn split_list(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect()
}

/// The guest's settings, the `[guest-config]` table of the resource's config
/// file with every value rendered as a string. Get it with [`config()`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    entries: Vec<(String, String)>,
}

impl Config {
    /// Wraps raw `(key, value)` pairs (useful in unit tests of a guest).
    pub fn from_pairs(entries: Vec<(String, String)>) -> Self {
        Self { entries }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        attr(&self.entries, key)
    }

    /// The value of `key`, or `default` when unset.
    pub fn get_or<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.get(key).unwrap_or(default)
    }

    /// The value of `key` as a comma-separated list (empty when unset).
    /// A TOML array rendered as a string (`["a", "b"]`) is accepted too.
    pub fn list(&self, key: &str) -> Vec<String> {
        let Some(value) = self.get(key) else {
            return Vec::new();
        };
        let value = value.trim();
        let value = value
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(value);
        split_list(value)
            .into_iter()
            .map(|item| item.trim_matches(|c| c == '"' || c == '\'').to_string())
            .filter(|item| !item.is_empty())
            .collect()
    }

    /// The value of `key` parsed as `T`: `Ok(None)` when unset, an error
    /// message naming the key when it does not parse.
    pub fn parse<T: core::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(raw) => raw
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("guest-config key `{key}`: cannot parse {raw:?}")),
        }
    }

    /// Every `(key, value)` pair, in the host's order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }
}

/// Fetches the guest's settings from the host (`host.config`).
pub fn config() -> Config {
    Config {
        entries: host::config(),
    }
}

/// Writes one line into the host's log at `level`; the host tags it with
/// the guest, the hook and the resource. Prefer the macros ([`info!`], ...).
pub fn log(level: LogLevel, message: &str) {
    host::log(level, message);
}

/// Logs a formatted line at `trace` level into the host's log.
#[macro_export]
macro_rules! trace {
    ($($arg:tt)*) => { $crate::log($crate::LogLevel::Trace, &::std::format!($($arg)*)) };
}
/// Logs a formatted line at `debug` level into the host's log.
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log($crate::LogLevel::Debug, &::std::format!($($arg)*)) };
}
/// Logs a formatted line at `info` level into the host's log.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log($crate::LogLevel::Info, &::std::format!($($arg)*)) };
}
/// Logs a formatted line at `warn` level into the host's log.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log($crate::LogLevel::Warn, &::std::format!($($arg)*)) };
}
/// Logs a formatted line at `error` level into the host's log.
#[macro_export]
macro_rules! error {
    ($($arg:tt)*) => { $crate::log($crate::LogLevel::Error, &::std::format!($($arg)*)) };
}

/// Convenience accessors on [`Candidate`].
impl Candidate {
    /// The value of the attribute `name`, if the candidate has it.
    pub fn attr(&self, name: &str) -> Option<&str> {
        attr(&self.attributes, name)
    }
}

/// Convenience accessors on [`Device`].
impl Device {
    /// The value of the attribute `name`, if the device has it.
    pub fn attr(&self, name: &str) -> Option<&str> {
        attr(&self.attributes, name)
    }
}

/// Convenience accessors on [`DeviceRef`].
impl DeviceRef {
    /// The value of the attribute `name`, if the device has it.
    pub fn attr(&self, name: &str) -> Option<&str> {
        attr(&self.attributes, name)
    }
}

/// Builders for hook answers.
impl Verdict {
    /// A healthy verdict for device `id`.
    pub fn healthy(id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            healthy: true,
            reason: reason.into(),
        }
    }

    /// An unhealthy verdict for device `id`.
    pub fn unhealthy(id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            healthy: false,
            reason: reason.into(),
        }
    }
}

/// Accessors on [`ClaimDevice`].
impl ClaimDevice {
    /// The amount of capacity `name` this allocation consumes, if any.
    pub fn consumed(&self, name: &str) -> Option<&str> {
        attr(&self.consumed_capacity, name)
    }
}

/// Builders for `dra-prepare` answers.
impl DeviceCondition {
    /// A `Ready` condition with status `True`, e.g.
    /// `DeviceCondition::ready("PartitionCreated", "created 1g.10gb")`.
    pub fn ready(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            type_: "Ready".to_string(),
            status: "True".to_string(),
            reason: reason.into(),
            message: message.into(),
        }
    }
}

impl DeviceStatus {
    /// The status of device `id`: one `Ready` condition (see
    /// [`DeviceCondition::ready`]), no data, no network facts.
    pub fn ready(
        id: impl Into<String>,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            conditions: vec![DeviceCondition::ready(reason, message)],
            data: None,
            network: None,
        }
    }

    /// The same status carrying driver-specific JSON `data`.
    #[must_use]
    pub fn with_data(mut self, data: impl Into<String>) -> Self {
        self.data = Some(data.into());
        self
    }
}

/// Builders for `dra-layout` answers.
impl Counter {
    /// A counter `name` holding `value` (a quantity such as `80Gi`).
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// Builders for `device-taints` answers.
impl DeviceTaint {
    /// A taint `key=value` with `effect`.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }
}

/// Builders for `device-taints-v2` answers.
impl DeviceTaintV2 {
    /// A taint `key=value` with `effect` (`TaintEffectV2::None` informs
    /// only).
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffectV2) -> Self {
        Self {
            key: key.into(),
            value: value.into(),
            effect,
        }
    }
}

/// Convenience accessors on [`PciFunction`].
impl PciFunction {
    /// The value of the attribute `name` (`class`, `vendor`, `device`), if
    /// the function has it.
    pub fn attr(&self, name: &str) -> Option<&str> {
        attr(&self.attributes, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_lists_and_parse() {
        let config = Config::from_pairs(vec![
            ("vendors".into(), "0x10de, 0x1002,".into()),
            ("arr".into(), "[\"a\", \"b\"]".into()),
            ("replicas".into(), "3".into()),
            ("bad".into(), "x".into()),
        ]);
        assert_eq!(config.list("vendors"), ["0x10de", "0x1002"]);
        assert_eq!(config.list("arr"), ["a", "b"]);
        assert!(config.list("missing").is_empty());
        assert_eq!(config.parse::<u32>("replicas"), Ok(Some(3)));
        assert_eq!(config.parse::<u32>("missing"), Ok(None));
        assert!(config.parse::<u32>("bad").unwrap_err().contains("`bad`"));
        assert_eq!(config.get_or("missing", "d"), "d");
    }
}

/// A bump allocator for guests: allocation is a pointer bump, `dealloc`
/// does nothing, `realloc` of the latest block grows it in place.
///
/// Meant for guests whose every call runs in a fresh instance (discovery,
/// health): a guest never gives memory back, and a bump allocator makes
/// the host's copying of large inputs into the guest (one allocation per
/// string and list) and the guest's own work cheaper. The price: memory
/// freed during the call is not reused, so a guest that churns through
/// temporaries may hit its memory cap sooner, and a warm instance
/// (allocation, allocate, pre-start) using it is recycled once it grew by
/// 4 MiB. Opt in with:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOCATOR: wdp_guest_sdk::BumpAllocator = wdp_guest_sdk::BumpAllocator::new();
/// ```
#[cfg(target_arch = "wasm32")]
pub struct BumpAllocator {
    state: core::cell::UnsafeCell<(usize, usize)>,
}

#[cfg(target_arch = "wasm32")]
// SAFETY: wasm32 guests of this host are single-threaded.
unsafe impl Sync for BumpAllocator {}

#[cfg(target_arch = "wasm32")]
impl BumpAllocator {
    /// An allocator with no memory yet; it grows linear memory on demand.
    pub const fn new() -> Self {
        Self {
            state: core::cell::UnsafeCell::new((0, 0)),
        }
    }
}

#[cfg(target_arch = "wasm32")]
impl Default for BumpAllocator {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(target_arch = "wasm32")]
unsafe impl core::alloc::GlobalAlloc for BumpAllocator {
    unsafe fn alloc(&self, layout: core::alloc::Layout) -> *mut u8 {
        const PAGE: usize = 65536;
        // SAFETY: single-threaded, and nothing here allocates (no reentrancy).
        let (next, end) = unsafe { &mut *self.state.get() };
        let align = layout.align();
        // At most two rounds: the second one runs after growing memory.
        for _ in 0..2 {
            let Some(start) = next.checked_add(align - 1).map(|n| n & !(align - 1)) else {
                return core::ptr::null_mut();
            };
            let Some(new_next) = start.checked_add(layout.size()) else {
                return core::ptr::null_mut();
            };
            if *end != 0 && new_next <= *end {
                *next = new_next;
                return start as *mut u8;
            }
            // Grow by what is needed, at least 1 MiB at a time.
            let pages = (layout.size() + align).div_ceil(PAGE).max(16);
            let previous = core::arch::wasm32::memory_grow(0, pages);
            if previous == usize::MAX {
                return core::ptr::null_mut();
            }
            let base = previous * PAGE;
            if *end != base {
                // Not contiguous with the current region: start afresh.
                *next = base;
            }
            *end = base + pages * PAGE;
        }
        core::ptr::null_mut()
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: core::alloc::Layout) {}

    unsafe fn realloc(
        &self,
        ptr: *mut u8,
        layout: core::alloc::Layout,
        new_size: usize,
    ) -> *mut u8 {
        // SAFETY: single-threaded.
        let (next, end) = unsafe { &mut *self.state.get() };
        // The latest block grows (or shrinks) in place when there is room.
        if ptr as usize + layout.size() == *next && ptr as usize + new_size <= *end {
            *next = ptr as usize + new_size;
            return ptr;
        }
        if new_size <= layout.size() {
            return ptr;
        }
        // SAFETY: the new layout is valid (same alignment, larger size).
        let new_layout =
            unsafe { core::alloc::Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: as for `alloc`.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are valid for `layout.size()` bytes and
            // do not overlap (the new one lies past `next`).
            unsafe { core::ptr::copy_nonoverlapping(ptr, new, layout.size()) };
        }
        new
    }
}
