//! The host: the one process that serves a node's configuration directory
//! to the kubelet. It checks the node's folders, loads the configuration,
//! puts every resource in service (through `wdp-resource`), serves each one
//! the way its config says (a device-plugin socket through
//! `wdp-device-plugin`, or a DRA driver through `wdp-dra-driver`), watches
//! the config directory and applies edits live, all or nothing, and stops
//! everything in order. It also loads a directory without serving it, for
//! `check`, `test` and `precompile`.
//!
//! It makes no per-device decision and speaks no kubelet protocol itself;
//! it owns no CLI, logging setup or HTTP endpoint (the binary does).
//!
//! The modules: `options` says where the host reads and serves
//! ([`HostOptions`]); `preflight` checks those folders; `supervisor` runs
//! the whole ([`Host`], its one changing state and the transitions of it
//! in `state`, with `launching` putting a resource in service,
//! `running` the served resources, `dra_api` the DRA drivers' port to the
//! API server, `watch` the folder watchers and
//! `shutdown` stopping everything, `start_up_memory` handing back what
//! start-up alone used); `reload` plans a live reload ([`ReloadSummary`])
//! before the supervisor applies it; [`config_sets`] says which
//! configuration set the node's label names and records the one applied,
//! `node_label` follows the label through the API server and `set_follower`
//! switches the set live when it changes; `node_event` posts a Warning
//! Event on the node;
//! `start_config` picks what a start serves, the node's configuration or,
//! when it is refused, the last good one `last_good` keeps in the state
//! folder;
//! [`metrics`] holds the one registry every layer counts into
//! ([`Metrics`]) and the host's own families;
//! `api_switch` hands a resource's devices over when a reload moves it
//! between the device-plugin API and DRA, `switching` is the host's side
//! of that, `switch_record` what of it survives a restart, and `resume`
//! what a starting host learns from the node (the kubelet's and the DRA
//! drivers' checkpoints) before it serves a resource either API may hold;
//! `offline` is `check`, `test` and `precompile` ([`check`],
//! [`load_offline`], [`precompile`]) with what the binary's other subcommands ask of a configuration,
//! and `record` the `record` snapshot; `error` is the one error type
//! ([`HostError`]).

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod api_switch;
pub mod config_sets;
mod dra_api;
mod error;
mod last_good;
mod launching;
pub mod metrics;
mod node_event;
mod node_label;
mod offline;
mod options;
mod preflight;
mod record;
mod refusal;
mod reload;
mod resume;
mod running;
mod set_follower;
mod shutdown;
mod start_config;
mod start_up_memory;
mod state;
mod supervisor;
mod switch_record;
mod switching;
mod watch;

pub use api_switch::{POD_RESOURCES_POLL, POD_RESOURCES_RETRY_MAX, RECENT_GRANTS};
pub use config_sets::{SwitchState, set_for_label};
pub use error::HostError;
pub use last_good::SNAPSHOT_DIR;
pub use metrics::Metrics;
pub use offline::{
    HookReport, LoadedResource, PrecompileReport, ResourceReport, check, check_cdi_dir_for,
    check_set, config_set_label, load_offline, load_offline_set, missing_guests, precompile,
    wants_precompiled_guests,
};
pub use options::{
    DEFAULT_PLUGINS_DIR, DEFAULT_POD_RESOURCES_SOCKET, DEFAULT_STATE_DIR, HostOptions,
};
pub use record::{RecordedResource, record};
pub use reload::ReloadSummary;
pub use start_config::EVENT_REASON;
pub use supervisor::Host;
/// What the host's options and reports carry: the registration path, the
/// CDI mode, and how a resource's registration is described.
pub use wdp_config::CdiMode;
/// What `check` and `test` print of a DRA resource.
pub use wdp_dra_driver::{DraReport, dra_report};
pub use wdp_kubelet_socket::RegistrationMode;
pub use wdp_kubelet_socket::plugin_watcher::{DEFAULT_PLUGINS_REGISTRY_DIR, describe_registration};
