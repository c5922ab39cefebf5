//! The read handlers shared by all kinds: get, list, and watch (a list with `watch=true`).

use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::app_state::AppState;
use crate::kinds::StoredKind;
use crate::query::{filter_from, query_map};
use crate::responses::{json_response, list_body};
use crate::status::ApiError;
use crate::store::WatchFrom;
use crate::watch::{self as watching, WatchEnders, WatchRequest};

/// `GET` of one cluster-scoped object.
pub(crate) async fn get_cluster<K: StoredKind>(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Response {
    respond_get::<K>(&state, "", &name)
}

/// `GET` of one namespaced object.
pub(crate) async fn get_namespaced<K: StoredKind>(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
) -> Response {
    respond_get::<K>(&state, &namespace, &name)
}

fn respond_get<K: StoredKind>(state: &AppState, namespace: &str, name: &str) -> Response {
    match state.store.get::<K>(namespace, name) {
        Ok(object) => json_response(StatusCode::OK, &object),
        Err(error) => error.into_response(),
    }
}

/// `GET` on a collection across all namespaces (or of a cluster-scoped kind).
pub(crate) async fn list_cluster<K: StoredKind>(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Response {
    list_or_watch::<K>(&state, None, query.as_deref()).unwrap_or_else(IntoResponse::into_response)
}

/// `GET` on a collection in one namespace.
pub(crate) async fn list_namespaced<K: StoredKind>(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    list_or_watch::<K>(&state, Some(namespace), query.as_deref())
        .unwrap_or_else(IntoResponse::into_response)
}

/// `GET` on a collection: a list, or a watch with `watch=true`. Lists are never paged: `limit`
/// is honoured by returning everything without a `continue` token, which the API allows.
fn list_or_watch<K: StoredKind>(
    state: &AppState,
    namespace: Option<String>,
    query: Option<&str>,
) -> Result<Response, ApiError> {
    let query = query_map(query);
    let filter = filter_from::<K>(namespace, &query)?;
    let flag = |key: &str| query.get(key).is_some_and(|v| v == "true" || v == "1");
    if !flag("watch") {
        let (items, version) = state.store.list::<K>(&filter);
        return Ok(json_response(StatusCode::OK, &list_body(&items, version)));
    }
    let send_initial_events = flag("sendInitialEvents");
    let version = query.get("resourceVersion").map_or("", String::as_str);
    let from =
        match version {
            _ if send_initial_events => WatchFrom::CurrentState,
            "" | "0" => WatchFrom::CurrentState,
            number => WatchFrom::After(number.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version {number:?}"))
            })?),
        };
    let timeout = match query.get("timeoutSeconds") {
        Some(seconds) => Some(Duration::from_secs(seconds.parse().map_err(|_| {
            ApiError::bad_request(format!("invalid timeoutSeconds {seconds:?}"))
        })?)),
        None => None,
    };
    let request = WatchRequest {
        filter,
        from,
        timeout,
        send_initial_events,
    };
    let enders = WatchEnders {
        refusing: state.refusing.clone(),
        stop: state.stop.clone(),
    };
    Ok(watching::respond::<K>(&state.store, request, enders))
}
