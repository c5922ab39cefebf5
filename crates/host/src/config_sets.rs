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

/// Writes the opt-in state label, each time the state (or the label's
/// value) changes.
struct StateReporter {
    client: wdp_dra_client::Client,
    node: String,
    key: String,
    enabled: bool,
    last: Option<(Option<String>, SwitchState)>,
}

impl StateReporter {
    async fn report(&mut self, value: &Option<String>, state: SwitchState) {
        let now = Some((value.clone(), state));
        if !self.enabled || self.last == now {
            return;
        }
        self.last = now;
        if let Err(error) =
            wdp_dra_client::set_node_label(&self.client, &self.node, &self.key, state.as_str())
                .await
        {
            tracing::warn!(node = %self.node, label = %self.key, %error, "cannot write the configuration set's state into the node's label");
        }
    }
}

/// Follows the node's label and switches `host` to the set it names,
/// until `stop` (or the host is gone). A set refused before is tried again
/// whenever the config directory changes.
pub(crate) fn follow_label(
    host: Weak<Host>,
    client: wdp_dra_client::Client,
    node: String,
    label: String,
    report_state: bool,
    stop: CancellationToken,
) {
    let mut values = wdp_dra_client::watch_node_label(client.clone(), &node, &label, stop.clone());
    let mut reporter = StateReporter {
        client,
        key: format!("{label}.state"),
        node,
        enabled: report_state,
        last: None,
    };
    tokio::spawn(async move {
        loop {
            let retry = match host.upgrade() {
                Some(host) => host.set_files_changed.clone(),
                None => return,
            };
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = values.changed() => if changed.is_err() { return },
                // The directory changed: a set refused before may load now.
                () = retry.notified() => {}
            }
            let NodeLabel::Value(value) = values.borrow_and_update().clone() else {
                continue;
            };
            let Some(host) = host.upgrade() else { return };
            let dir = host.options().config_dir.clone();
            let current = host.config_set().await;
            let wanted = match set_for_label(&dir, &label, value.as_deref()) {
                Ok(wanted) => wanted,
                Err(problem) => {
                    tracing::error!(%problem, serving = %shown(current.as_deref()), "configuration set not switched; the current one keeps serving");
                    reporter.report(&value, SwitchState::Failed).await;
                    continue;
                }
            };
            if current == wanted {
                reporter.report(&value, SwitchState::Success).await;
                continue;
            }
            reporter.report(&value, SwitchState::Pending).await;
            let outcome = host.switch_config_set(wanted.clone()).await;
            let shown_label = format!("{label}={}", value.as_deref().unwrap_or(""));
            match outcome {
                Ok(summary) => {
                    tracing::info!(from = %shown(current.as_deref()), to = %shown(wanted.as_deref()), label = %shown_label, added = ?summary.added, removed = ?summary.removed, updated = ?summary.updated, "configuration set switched");
                    reporter.report(&value, SwitchState::Success).await;
                }
                Err(error) => {
                    tracing::error!(%error, label = %shown_label, wanted = %shown(wanted.as_deref()), serving = %shown(current.as_deref()), sets = %describe_available(&dir), "configuration set refused; the current one keeps serving");
                    reporter.report(&value, SwitchState::Failed).await;
                }
            }
        }
    });
}
