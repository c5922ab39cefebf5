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
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the watch has learnt of the label.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeLabel {
    /// The API server has not answered yet (or the node does not exist).
    Unknown,
    /// The node's label value (`None`: no such label).
    Value(Option<String>),
}

/// Follows label `label` of node `node` until `stop`; the receiver sees
/// each change. Watch failures are logged (WARN, once per failure run)
/// and retried with backoff; the last value stays meanwhile.
pub fn watch_node_label(
    client: Client,
    node: &str,
    label: &str,
    stop: CancellationToken,
) -> watch::Receiver<NodeLabel> {
    let (tx, rx) = watch::channel(NodeLabel::Unknown);
    let api: Api<Node> = Api::all(client);
    let selector = format!("metadata.name={node}");
    let (node, label) = (node.to_owned(), label.to_owned());
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default().fields(&selector))
            .default_backoff()
            .boxed();
        let mut failing = false;
        loop {
            let event = tokio::select! {
                _ = stop.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                None => return,
                Some(Err(error)) => {
                    if !failing {
                        tracing::warn!(%node, %label, %error, "cannot watch the node's labels; retrying, the configuration set being served stays");
                        failing = true;
                    }
                }
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    if failing {
                        tracing::info!(%node, "watching the node's labels works again");
                        failing = false;
                    }
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

/// Sets label `key` of node `node` to `value` (a JSON merge patch; RBAC
/// `patch` on nodes).
pub async fn set_node_label(
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
