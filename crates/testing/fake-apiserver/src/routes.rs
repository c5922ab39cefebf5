//! The HTTP surface: which paths and verbs are served by which handler (the reads in
//! [`reads`](crate::reads), the ResourceSlice writes in [`writes`](crate::writes), the
//! ResourceClaim status writes in [`claim_status`](crate::claim_status)), the gate every
//! request passes (counting, refusing with 503, throttling writes), `/version`, and the answers to unknown paths and
//! verbs.

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::json;

use crate::app_state::AppState;
use crate::claim_status;
use crate::reads::{get_cluster, get_namespaced, list_cluster, list_namespaced};
use crate::responses::json_response;
use crate::status::ApiError;
use crate::writes;

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
        .route(
            "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status",
            get(get_namespaced::<ResourceClaim>)
                .put(claim_status::replace_status)
                .patch(claim_status::patch_status),
        )
        .route("/api/v1/nodes", get(list_cluster::<Node>))
        .route(
            "/api/v1/namespaces/{namespace}/events",
            axum::routing::post(crate::events::create_event),
        )
        .route(
            "/api/v1/nodes/{name}",
            get(get_cluster::<Node>).patch(crate::nodes::patch_node),
        )
        .fallback(|uri: Uri| async move { ApiError::no_route(uri.path()) })
        .method_not_allowed_fallback(|method: Method| async move {
            ApiError::method_not_allowed(method.as_str())
        })
        .layer(middleware::from_fn_with_state(state.clone(), gate))
        .with_state(state)
}

/// Counts every request, answers 503 while the server refuses, lets the faults answer (or
/// hold a request unanswered), and lets the throttle answer or log ResourceSlice writes.
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
    if let Some(answer) = state.faults.answer(&request) {
        return answer;
    }
    if state.faults.hangs(&request) {
        // Held until the client gives up (it drops the connection).
        std::future::pending::<()>().await;
    }
    state.throttling.gate(request, next).await
}

/// `GET /version`: the served minor version (1.34 unless a test chose another).
async fn version(State(state): State<AppState>) -> Response {
    let minor = state.store.config().minor;
    json_response(
        StatusCode::OK,
        &json!({
            "major": "1",
            "minor": minor.to_string(),
            "gitVersion": format!("v1.{minor}.0-wdp-fake"),
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}
