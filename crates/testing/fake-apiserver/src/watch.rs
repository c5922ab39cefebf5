//! Watch responses: newline-delimited `{"type":…,"object":…}` events streamed in a chunked
//! body, as `kube::runtime::watcher` reads them.
//!
//! A watch starts from a resourceVersion (changes after it, or a 410 `Expired` ERROR event when
//! that history is gone), from the current state (synthetic ADDED events when no version or "0"
//! is given), or as a streaming list (`sendInitialEvents=true`: the current state, then a BOOKMARK
//! annotated `k8s.io/initial-events-end`). It ends at `timeoutSeconds`, when the server starts
//! refusing requests, when the server stops or restarts, or when the client goes away.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use serde_json::json;
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::collection::{Change, ChangeKind};
use crate::kinds::StoredKind;
use crate::status::ApiError;
use crate::store::{Filter, Store, WatchFrom};

/// The watch parameters of one request.
#[derive(Debug, Clone)]
pub(crate) struct WatchRequest {
    pub(crate) filter: Filter,
    pub(crate) from: WatchFrom,
    pub(crate) timeout: Option<Duration>,
    /// `sendInitialEvents=true`: end the initial state with an annotated BOOKMARK.
    pub(crate) send_initial_events: bool,
}

/// What ends every watch of a server generation early.
#[derive(Debug, Clone)]
pub(crate) struct WatchEnders {
    /// True while the server refuses requests.
    pub(crate) refusing: watch::Receiver<bool>,
    /// Cancelled when the server stops or restarts.
    pub(crate) stop: CancellationToken,
}

/// Opens the watch and answers with its streaming body.
pub(crate) fn respond<K: StoredKind>(
    store: &Store,
    request: WatchRequest,
    enders: WatchEnders,
) -> Response {
    let (lines, receiver) = mpsc::channel::<Bytes>(64);
    match store.watch::<K>(&request.filter, request.from) {
        Ok(start) => {
            tokio::spawn(feed::<K>(
                start.backlog,
                start.live,
                start.resource_version,
                request,
                enders,
                lines,
            ));
        }
        Err(error) => {
            // The real server answers 200 and reports an expired version as an ERROR event.
            let line = error_line(&error);
            tokio::spawn(async move {
                let _ = lines.send(line).await;
            });
        }
    }
    let body = Body::from_stream(ReceiverStream::new(receiver).map(Ok::<_, Infallible>));
    let mut response = Response::new(body);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Sends the backlog, then live changes, until one of the enders fires.
async fn feed<K: StoredKind>(
    backlog: Vec<Arc<Change<K>>>,
    mut live: broadcast::Receiver<Arc<Change<K>>>,
    backlog_version: u64,
    request: WatchRequest,
    mut enders: WatchEnders,
    lines: mpsc::Sender<Bytes>,
) {
    let deadline = request.timeout.map(|t| tokio::time::Instant::now() + t);
    for change in &backlog {
        if let Some(line) = event_line(change, &request.filter)
            && lines.send(line).await.is_err()
        {
            return;
        }
    }
    if request.send_initial_events
        && lines
            .send(initial_events_end::<K>(backlog_version))
            .await
            .is_err()
    {
        return;
    }
    let timeout = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    loop {
        let change = tokio::select! {
            _ = enders.stop.cancelled() => return,
            _ = enders.refusing.wait_for(|refusing| *refusing) => return,
            _ = &mut timeout => return,
            _ = lines.closed() => return,
            received = live.recv() => match received {
                Ok(change) => change,
                // Fallen behind or the store is gone: end; the client resumes from its last version.
                Err(_) => return,
            },
        };
        if let Some(line) = event_line(&change, &request.filter)
            && lines.send(line).await.is_err()
        {
            return;
        }
    }
}

/// The event a filtered watcher sees for `change`, if any: a modification that moves an object
/// into the selection is ADDED, one that moves it out is DELETED.
fn event_line<K: StoredKind>(change: &Change<K>, filter: &Filter) -> Option<Bytes> {
    let now = filter.matches(&change.object);
    let kind = match (change.kind, &change.previous) {
        (ChangeKind::Modified, Some(previous)) => match (filter.matches(previous), now) {
            (true, true) => "MODIFIED",
            (false, true) => "ADDED",
            (true, false) => "DELETED",
            (false, false) => return None,
        },
        _ if !now => return None,
        (ChangeKind::Added, _) => "ADDED",
        (ChangeKind::Modified, None) => "MODIFIED",
        (ChangeKind::Deleted, _) => "DELETED",
    };
    Some(line(&json!({"type": kind, "object": change.object})))
}

/// The BOOKMARK that ends a streaming list's initial events.
fn initial_events_end<K: StoredKind>(resource_version: u64) -> Bytes {
    line(&json!({
        "type": "BOOKMARK",
        "object": {
            "apiVersion": K::API_VERSION,
            "kind": K::KIND,
            "metadata": {
                "resourceVersion": resource_version.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"},
            },
        },
    }))
}

fn error_line(error: &ApiError) -> Bytes {
    line(&json!({"type": "ERROR", "object": error.to_status()}))
}

fn line(value: &serde_json::Value) -> Bytes {
    let mut text = value.to_string();
    text.push('\n');
    Bytes::from(text)
}
