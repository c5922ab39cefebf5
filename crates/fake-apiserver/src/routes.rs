//! The HTTP surface: which paths and verbs are served, the gate every request passes (counting,
//! refusing with 503), and the read handlers (get, list, watch) shared by all kinds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::json;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::kinds::StoredKind;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::status::ApiError;
use crate::store::{Filter, Store, WatchFrom};
use crate::watch::{self as watching, WatchEnders, WatchRequest};
use crate::writes;

/// What the handlers of one server generation share.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) refusing: watch::Receiver<bool>,
    /// Cancelled when this generation of the server stops (restart or drop).
    pub(crate) stop: CancellationToken,
}

/// The router of one server generation.
pub(crate) fn router(state: AppState) -> Router {
    const SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
    Router::new()
        .route("/version", get(version))
        .route(
            SLICES,
            get(list_cluster::<ResourceSlice>)
                .post(writes::create_slice)
                .delete(writes::delete_slice_collection),
        )
        .route(
            &format!("{SLICES}/{{name}}"),
            get(get_cluster::<ResourceSlice>)
                .put(writes::replace_slice)
                .patch(writes::patch_slice)
                .delete(writes::delete_slice),
        )
        .route(
            "/apis/resource.k8s.io/v1/resourceclaims",
            get(list_cluster::<ResourceClaim>),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims",
            get(list_namespaced::<ResourceClaim>),
        )
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}",
            get(get_namespaced::<ResourceClaim>),
        )
        .route("/api/v1/nodes", get(list_cluster::<Node>))
        .route("/api/v1/nodes/{name}", get(get_cluster::<Node>))
        .fallback(|uri: Uri| async move { ApiError::no_route(uri.path()) })
        .method_not_allowed_fallback(|method: Method| async move {
            ApiError::method_not_allowed(method.as_str())
        })
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

/// Counts every request and answers 503 while the server refuses.
async fn gate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    state
        .store
        .stats
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .requests_total += 1;
    if *state.refusing.borrow() {
        return ApiError::unavailable().into_response();
    }
    next.run(request).await
}

/// `GET /version`: a 1.34 server.
async fn version() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": "34",
            "gitVersion": "v1.34.0-wdp-fake",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

/// A JSON response with `code`.
pub(crate) fn json_response(code: StatusCode, body: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::from(bytes),
        )
            .into_response(),
        Err(error) => {
            ApiError::internal(&format!("encoding the response: {error}")).into_response()
        }
    }
}

/// The query string as a map (later repeats win).
pub(crate) fn query_map(query: Option<&str>) -> HashMap<String, String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// The filter of a list, watch or collection delete.
pub(crate) fn filter_from<K: StoredKind>(
    namespace: Option<String>,
    query: &HashMap<String, String>,
) -> Result<Filter, ApiError> {
    Ok(Filter {
        namespace,
        fields: FieldSelector::parse(
            query.get("fieldSelector").map_or("", String::as_str),
            &K::selectable_fields(),
        )?,
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))?,
    })
}

/// A `kind: <Kind>List` body.
pub(crate) fn list_body<K: StoredKind>(items: &[K], resource_version: u64) -> serde_json::Value {
    json!({
        "apiVersion": K::API_VERSION,
        "kind": format!("{}List", K::KIND),
        "metadata": {"resourceVersion": resource_version.to_string()},
        "items": items,
    })
}

async fn get_cluster<K: StoredKind>(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Response {
    respond_get::<K>(&state, "", &name)
}

async fn get_namespaced<K: StoredKind>(
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

async fn list_cluster<K: StoredKind>(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Response {
    list_or_watch::<K>(&state, None, query.as_deref()).unwrap_or_else(IntoResponse::into_response)
}

async fn list_namespaced<K: StoredKind>(
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
