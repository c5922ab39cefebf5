//! Node writes over HTTP: `PATCH /api/v1/nodes/{name}` (merge or JSON
//! patch), what a host reporting its configuration set's state into a
//! node label sends. Nodes are otherwise written by the test
//! (`FakeApiServer::put_node`).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Node;

use crate::app_state::AppState;
use crate::patch_request::patch_object;
use crate::request::is_dry_run;
use crate::responses::json_response;

/// `PATCH /api/v1/nodes/{name}`.
pub(crate) async fn patch_node(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let written = patch_object::<Node>(
        &headers,
        &body,
        || state.store.get("", &name),
        |patched| {
            state
                .store
                .replace("", &name, patched, is_dry_run(query.as_deref()))
        },
    );
    match written {
        Ok(node) => json_response(StatusCode::OK, &node),
        Err(error) => error.into_response(),
    }
}
