//! Which configuration set this node runs (see
//! `wdp_config::sets`): the one its node label names, switched
//! live when the label changes, recorded so a restart serves it again
//! before the API server answers.
//!
//! - **At start** the host serves the set recorded in
//!   `<state-dir>/config-set` (the last one applied) when the directory
//!   still holds it, else the default set, and says which; when the
//!   recorded set no longer loads, the last good snapshot
//!   (`crate::start_config`), else the default set.
//! - **One set's mistake stays with it**: a folder under `sets/` whose
//!   name cannot name a set is set aside (ERROR at start); only a node
//!   whose label names it is refused (`failed`, `config_valid` 0).
//! - **While serving** it follows the node's label (`[config-sets]
//!   node-label`, default `wasm-device-plugin.io/config`): a value naming a
//!   set applies that set as a live reload (validated first, only what
//!   changed restarted, the last good set kept when it is refused); no
//!   label, an empty one or `default` applies the default set; a value
//!   naming no set is refused at ERROR, naming the value and the sets
//!   there are. Each switch is one INFO line.
//! - **Opt-in** (`report-state = true`), the outcome goes into the node
//!   label `<node-label>.state`: `pending`, `success` or `failed`.
//!
//! This module holds what needs no running host (the record, the label's
//! meaning, the set `start` serves); `set_follower` follows the label and
//! switches a running [`Host`](crate::Host).

use std::path::{Path, PathBuf};

use wdp_cdi::atomic_file::{self, Durability};
use wdp_config::ConfigSet;
use wdp_config::sets::{DEFAULT_SET, describe_available, scan_sets};

use crate::error::HostError;
use crate::options::HostOptions;

/// The file under the state folder recording the set last applied.
pub const RECORD_FILE: &str = "config-set";

/// Where the set last applied is recorded.
pub fn record_path(state_dir: &Path) -> PathBuf {
    state_dir.join(RECORD_FILE)
}

/// The name a set is shown by: `default` for the top-level one.
pub fn shown(set: Option<&str>) -> &str {
    set.unwrap_or(DEFAULT_SET)
}

/// The set recorded as last applied, when `dir` still holds it (`None`:
/// the default set, or nothing recorded).
pub fn recorded(state_dir: &Path, dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(record_path(state_dir)).ok()?;
    let name = text.trim();
    scan_sets(dir)
        .ok()?
        .sets
        .into_iter()
        .find(|known| known == name)
}

/// Records `set` as the one applied (a failure is logged: the next start
/// then serves the default set until the label is read).
pub fn record(state_dir: &Path, set: Option<&str>) {
    let path = record_path(state_dir);
    let written = std::fs::create_dir_all(state_dir)
        .and_then(|()| atomic_file::replace(&path, shown(set).as_bytes(), Durability::Synced));
    if let Err(error) = written {
        tracing::warn!(path = %path.display(), %error, "cannot record the configuration set applied; a restart serves the default set until the node's label is read");
    }
}

/// The set a node labelled `value` runs in `dir`: `Ok(None)` for the
/// default set; an error naming the value and the sets there are when it
/// names none, or naming the folder when the one it names cannot name a
/// set (a folder `sets/default` concerns the nodes labelled `default`;
/// nodes with no label or an empty one run the default set regardless).
pub fn set_for_label(
    dir: &Path,
    label: &str,
    value: Option<&str>,
) -> Result<Option<String>, String> {
    let value = match value.map(str::trim) {
        None | Some("") => return Ok(None),
        Some(value) => value,
    };
    let found = scan_sets(dir).map_err(|error| error.to_string())?;
    if let Some(refused) = found.refusal(value) {
        return Err(format!(
            "node label {label}={value}: the folder it names is refused: {refused}"
        ));
    }
    if value == DEFAULT_SET {
        return Ok(None);
    }
    if found.sets.iter().any(|set| set == value) {
        Ok(Some(value.to_owned()))
    } else {
        Err(format!(
            "node label {label}={value} names no configuration set in {} (sets: {})",
            dir.display(),
            describe_available(dir)
        ))
    }
}

/// What a switch reports in the opt-in state label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SwitchState {
    /// The switch is under way.
    Pending,
    /// The set the label names is served.
    Success,
    /// The label names no set, or the set was refused.
    Failed,
}

impl SwitchState {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SwitchState::Pending => "pending",
            SwitchState::Success => "success",
            SwitchState::Failed => "failed",
        }
    }
}

/// The configuration `start` serves: the set recorded as last applied
/// when the directory still holds it and it loads, else the default set;
/// logged either way when the directory holds sets. When the recorded set
/// is refused: its error, unless `default_if_refused` (no last good
/// snapshot to serve instead), when the default set is served. A set
/// folder whose name cannot name a set is logged (ERROR, by name) and set
/// aside: it refuses no other set.
pub(crate) async fn load_initial_set(
    options: &HostOptions,
    default_if_refused: bool,
) -> Result<ConfigSet, HostError> {
    let dir = options.config_dir.clone();
    let state_dir = options.state_dir.clone();
    tokio::task::spawn_blocking(move || {
        let found = scan_sets(&dir)?;
        for error in found.refusals() {
            tracing::error!(%error, "configuration set folder refused; only nodes whose label names it are affected, every other set is served as usual");
        }
        if found.sets.is_empty() {
            return Ok(wdp_config::load_dir(&dir)?);
        }
        let record = record_path(&state_dir);
        if let Some(set) = recorded(&state_dir, &dir) {
            match wdp_config::load_set(&dir, Some(&set)) {
                Ok(config) => {
                    tracing::info!(set = %set, recorded_in = %record.display(), sets = %describe_available(&dir), "serving the configuration set last applied until the node's label is read");
                    return Ok(config);
                }
                Err(error) if !default_if_refused => return Err(error.into()),
                Err(error) => {
                    tracing::error!(set = %set, %error, "the configuration set last applied is refused now, and there is no last good snapshot of it; serving the default set until the node's label is read");
                    return Ok(wdp_config::load_dir(&dir)?);
                }
            }
        }
        tracing::info!(sets = %describe_available(&dir), "serving the default configuration set until the node's label is read (none recorded as applied)");
        Ok(wdp_config::load_dir(&dir)?)
    })
    .await
    .map_err(HostError::Task)?
}
