//! Following the node's label that picks the configuration set, and
//! switching a running [`Host`] to the set it names (see
//! [`crate::config_sets`] for the rules).

use std::sync::{Arc, Weak};

use crate::node_label::{NodeLabel, set_node_label, watch_node_label};
use tokio_util::sync::CancellationToken;
use wdp_config::sets::{describe_available, scan_sets};

use crate::config_sets::{self, SwitchState, set_for_label, shown};
use crate::error::HostError;
use crate::reload::ReloadSummary;
use crate::supervisor::Host;

impl Host {
    /// The configuration set served now (`None`: the default set).
    pub async fn config_set(&self) -> Option<String> {
        self.state.lock().await.config.set.clone()
    }

    /// Applies configuration set `set` (`None`: the default) as a live
    /// reload, and records it as the one applied; on any error nothing
    /// changes and the error is returned (and counted).
    pub async fn switch_config_set(&self, set: Option<String>) -> Result<ReloadSummary, HostError> {
        self.switch_set(set).await.map_err(|(error, _)| error)
    }

    /// [`switch_config_set`](Self::switch_config_set), its error saying
    /// too whether this refusal is new (the same content refused for the
    /// same reason again is counted and logged once).
    async fn switch_set(&self, set: Option<String>) -> Result<ReloadSummary, (HostError, bool)> {
        let before = self.config_content().await;
        match self.try_reload(Some(set.clone())).await {
            Ok(summary) => {
                self.metrics.host.reload(true);
                self.last_error.send_replace(None);
                config_sets::record(&self.options.state_dir, set.as_deref());
                Ok(summary)
            }
            Err(error) => {
                let new = self.refused(set.as_deref(), before, &error).await;
                Err((error, new))
            }
        }
    }

    /// Starts following the node's label that picks the configuration
    /// set, once the directory holds set folders, refused ones included
    /// (at start, or at the first reload that finds some).
    pub(crate) async fn follow_set_label(self: &Arc<Self>) {
        let dir = self.options.config_dir.clone();
        if !scan_sets(&dir).is_ok_and(|found| found.any()) {
            return;
        }
        let settings = {
            let mut state = self.state.lock().await;
            if !state.start_following_label() {
                return;
            }
            state.config.host.config_sets.clone()
        };
        if self.options.node_name.is_empty() {
            tracing::error!(label = %settings.node_label, "the config directory holds configuration sets, but no node name was given (--node-name, NODE_NAME): the node's label cannot be read, and the set being served stays");
            return;
        }
        let client = match wdp_dra_client::client(self.options.kubeconfig.as_deref()).await {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(label = %settings.node_label, %error, "cannot reach the API server to read the node's label that picks the configuration set; the set being served stays");
                return;
            }
        };
        tracing::info!(node = %self.options.node_name, label = %settings.node_label, sets = %describe_available(&dir), "following the node's label that picks the configuration set");
        follow_label(
            Arc::downgrade(self),
            client,
            self.options.node_name.clone(),
            settings.node_label,
            settings.report_state,
            self.shutdown.clone(),
        );
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
            set_node_label(&self.client, &self.node, &self.key, state.as_str()).await
        {
            tracing::warn!(node = %self.node, label = %self.key, %error, "cannot write the configuration set's state into the node's label");
        }
    }
}

/// Follows the node's label and switches `host` to the set it names,
/// until `stop` (or the host is gone). A set refused before is tried again
/// whenever the config directory changes.
fn follow_label(
    host: Weak<Host>,
    client: wdp_dra_client::Client,
    node: String,
    label: String,
    report_state: bool,
    stop: CancellationToken,
) {
    let mut values = watch_node_label(client.clone(), &node, &label, stop.clone());
    let mut reporter = StateReporter {
        client,
        key: format!("{label}.state"),
        node,
        enabled: report_state,
        last: None,
    };
    tokio::spawn(async move {
        // The latest label or switch was refused: the set served is read
        // again once the label names it.
        let mut refused = false;
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
                    host.metrics.host.config_valid.set(0);
                    refused = true;
                    reporter.report(&value, SwitchState::Failed).await;
                    continue;
                }
            };
            if current == wanted {
                // After a refusal, the set served is read again: its own
                // files decide (and `config_valid` says so again).
                if std::mem::take(&mut refused) {
                    let _ = host.reload().await;
                }
                let state = if host.last_error.borrow().is_some() {
                    SwitchState::Failed
                } else {
                    SwitchState::Success
                };
                reporter.report(&value, state).await;
                continue;
            }
            reporter.report(&value, SwitchState::Pending).await;
            refused = true;
            let outcome = host.switch_set(wanted.clone()).await;
            let shown_label = format!("{label}={}", value.as_deref().unwrap_or(""));
            match outcome {
                Ok(summary) => {
                    refused = false;
                    tracing::info!(from = %shown(current.as_deref()), to = %shown(wanted.as_deref()), label = %shown_label, added = ?summary.added, removed = ?summary.removed, updated = ?summary.updated, "configuration set switched");
                    reporter.report(&value, SwitchState::Success).await;
                }
                Err((error, true)) => {
                    tracing::error!(%error, label = %shown_label, wanted = %shown(wanted.as_deref()), serving = %shown(current.as_deref()), sets = %describe_available(&dir), "configuration set refused; the current one keeps serving");
                    reporter.report(&value, SwitchState::Failed).await;
                }
                Err((_, false)) => reporter.report(&value, SwitchState::Failed).await,
            }
        }
    });
}
