//! Which configuration set this node runs (see
//! `wdp_resource::config::sets`): the one its node label names, switched
//! live when the label changes, recorded so a restart serves it again
//! before the API server answers.
//!
//! - **At start** the host serves the set recorded in
//!   `<state-dir>/config-set` (the last one applied) when the directory
//!   still holds it, else the default set, and says which.
//! - **While serving** it follows the node's label (`[config-sets]
//!   node-label`, default `wasm-device-plugin.io/config`): a value naming a
//!   set applies that set as a live reload (validated first, only what
//!   changed restarted, the last good set kept when it is refused); no
//!   label, an empty one or `default` applies the default set; a value
//!   naming no set is refused at ERROR, naming the value and the sets
//!   there are. Each switch is one INFO line.
//! - **Opt-in** (`report-state = true`), the outcome goes into the node
//!   label `<node-label>.state`: `pending`, `success` or `failed`.

use std::path::{Path, PathBuf};
use std::sync::Weak;

use tokio_util::sync::CancellationToken;
use wdp_dra_client::NodeLabel;
use wdp_resource::atomic_file::{self, Durability};
use wdp_resource::config::sets::{DEFAULT_SET, describe_available, named_sets};

use crate::supervisor::Host;

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
    named_sets(dir)
        .ok()?
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
/// names none.
pub fn set_for_label(
    dir: &Path,
    label: &str,
    value: Option<&str>,
) -> Result<Option<String>, String> {
    let value = match value.map(str::trim) {
        None | Some("") => return Ok(None),
        Some(value) if value == DEFAULT_SET => return Ok(None),
        Some(value) => value,
    };
    let sets = named_sets(dir).map_err(|error| error.to_string())?;
    if sets.iter().any(|set| set == value) {
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

/// Follows the node's label and switches `host` to the set it names,
/// until `stop` (or the host is gone).
pub(crate) fn follow_label(
    host: Weak<Host>,
    client: wdp_dra_client::Client,
    node: String,
    label: String,
    report_state: bool,
    stop: CancellationToken,
) {
    let mut values = wdp_dra_client::watch_node_label(client.clone(), &node, &label, stop.clone());
    let state_label = format!("{label}.state");
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = values.changed() => if changed.is_err() { return },
            }
            let NodeLabel::Value(value) = values.borrow_and_update().clone() else {
                continue;
            };
            let Some(host) = host.upgrade() else { return };
            let report = |state: SwitchState| {
                let (client, node, key) = (client.clone(), node.clone(), state_label.clone());
                async move {
                    if !report_state {
                        return;
                    }
                    if let Err(error) =
                        wdp_dra_client::set_node_label(&client, &node, &key, state.as_str()).await
                    {
                        tracing::warn!(%node, label = %key, %error, "cannot write the configuration set's state into the node's label");
                    }
                }
            };
            let dir = host.options().config_dir.clone();
            let current = host.config_set().await;
            let wanted = match set_for_label(&dir, &label, value.as_deref()) {
                Ok(wanted) => wanted,
                Err(problem) => {
                    tracing::error!(%problem, serving = %shown(current.as_deref()), "configuration set not switched; the current one keeps serving");
                    report(SwitchState::Failed).await;
                    continue;
                }
            };
            if current == wanted {
                report(SwitchState::Success).await;
                continue;
            }
            report(SwitchState::Pending).await;
            let outcome = host.switch_config_set(wanted.clone()).await;
            let value = value.as_deref().unwrap_or("");
            match outcome {
                Ok(summary) => {
                    tracing::info!(from = %shown(current.as_deref()), to = %shown(wanted.as_deref()), label = %format!("{label}={value}"), added = ?summary.added, removed = ?summary.removed, updated = ?summary.updated, "configuration set switched");
                    report(SwitchState::Success).await;
                }
                Err(error) => {
                    tracing::error!(%error, label = %format!("{label}={value}"), wanted = %shown(wanted.as_deref()), serving = %shown(current.as_deref()), sets = %describe_available(&dir), "configuration set refused; the current one keeps serving");
                    report(SwitchState::Failed).await;
                }
            }
        }
    });
}
