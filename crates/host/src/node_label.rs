//! One label of this node's Node object, followed: what picks the node's
//! configuration set. A watch on the node alone (a field selector on its
//! name; RBAC `get`, `list`, `watch` on nodes), restarted with backoff
//! when the API server goes away, reports the label's value whenever it
//! changes, and `None` while the node carries no such label.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the watch has learnt of the label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NodeLabel {
    /// The API server has not answered yet (or the node does not exist).
    Unknown,
    /// The node's label value (`None`: no such label).
    Value(Option<String>),
}

/// The first wait between reads of the node while its watch fails; it
/// doubles up to [`PROBE_MAX`].
pub(crate) const PROBE_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between reads of the node while its watch fails.
pub(crate) const PROBE_MAX: Duration = Duration::from_secs(30);

/// Follows label `label` of node `node` until `stop`; the receiver sees
/// each change. A failing watch is logged once (WARN) and retried with
/// backoff, the last value staying meanwhile; its recovery is logged once
/// (INFO) as soon as the API server answers again: a watch that resumes
/// brings no event until the node changes, so while failing the node is
/// also read, with its own backoff (1 s doubling to 30 s).
/// Each outage is one WARN and one INFO, every outage.
pub(crate) fn watch_node_label(
    client: Client,
    node: &str,
    label: &str,
    stop: CancellationToken,
) -> watch::Receiver<NodeLabel> {
    let (tx, rx) = watch::channel(NodeLabel::Unknown);
    let api: Api<Node> = Api::all(client);
    let nodes = api.clone();
    let selector = format!("metadata.name={node}");
    let (node, label) = (node.to_owned(), label.to_owned());
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default().fields(&selector))
            .default_backoff()
            .boxed();
        // While failing: when the node is read next, and the wait after.
        let mut failing: Option<(tokio::time::Instant, Duration)> = None;
        let send = |object: &Node| {
            let value = object
                .metadata
                .labels
                .as_ref()
                .and_then(|labels| labels.get(&label))
                .cloned();
            tx.send_if_modified(|current| {
                let new = NodeLabel::Value(value);
                let changed = *current != new;
                *current = new;
                changed
            });
        };
        loop {
            let probe_at = failing.map(|(at, _)| at);
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
                () = sleep_until(probe_at), if probe_at.is_some() => {
                    match nodes.get_opt(&node).await {
                        Ok(found) => {
                            tracing::info!(%node, "watching the node's labels works again");
                            failing = None;
                            if let Some(object) = found {
                                send(&object);
                            }
                        }
                        Err(_) => failing = failing.map(|(_, wait)| {
                            let wait = (wait * 2).min(PROBE_MAX);
                            (tokio::time::Instant::now() + wait, wait)
                        }),
                    }
                    continue;
                }
            };
            match event {
                None => return,
                Some(Err(error)) => {
                    if failing.is_none() {
                        tracing::warn!(%node, %label, %error, "cannot watch the node's labels; retrying, the configuration set being served stays");
                        failing = Some((tokio::time::Instant::now() + PROBE_FIRST, PROBE_FIRST));
                    }
                }
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    if failing.take().is_some() {
                        tracing::info!(%node, "watching the node's labels works again");
                    }
                    send(&object);
                }
                Some(Ok(Event::Delete(_))) => {
                    tx.send_replace(NodeLabel::Unknown);
                }
                Some(Ok(Event::Init | Event::InitDone)) => {}
            }
        }
    });
    rx
}

/// Sleeps until `at` (forever when `None`).
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Sets label `key` of node `node` to `value` (a JSON merge patch; RBAC
/// `patch` on nodes).
pub(crate) async fn set_node_label(
    client: &Client,
    node: &str,
    key: &str,
    value: &str,
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
    api.patch(
        node,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
#[path = "node_label_tests.rs"]
mod tests;
