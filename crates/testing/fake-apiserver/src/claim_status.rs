//! The ResourceClaim `status` subresource over HTTP:
//! `GET`, `PUT` and `PATCH /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}/status`.
//! A PUT or PATCH writes only `status` (see [`Store::replace_claim_status`]), honours
//! `metadata.resourceVersion` with 409 Conflict, and is counted in
//! [`Stats`](crate::stats::Stats) when accepted or rejected.
//!
//! [`Store::replace_claim_status`]: crate::store::Store::replace_claim_status

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::app_state::AppState;
use crate::patch_request::patch_object;
use crate::request::{decode, is_dry_run};
use crate::responses::json_response;
use crate::stats::RejectedWrite;
use crate::status::ApiError;
use crate::validation;

/// The claim, or 400 when one of its quantities does not parse.
fn decodable(claim: ResourceClaim) -> Result<ResourceClaim, ApiError> {
    match validation::claim_body_problem(&claim) {
        Some(problem) => Err(ApiError::bad_request(format!(
            "ResourceClaim in version \"v1\" cannot be handled as a ResourceClaim: {problem}"
        ))),
        None => Ok(claim),
    }
}

/// Counts the outcome of a status write and turns it into the response.
fn finish(
    state: &AppState,
    verb: &'static str,
    namespace: &str,
    name: &str,
    outcome: Result<ResourceClaim, ApiError>,
) -> Response {
    let mut stats = state.store.stats.lock().unwrap_or_else(|p| p.into_inner());
    match outcome {
        Ok(claim) => {
            stats.claim_status_writes += 1;
            drop(stats);
            json_response(StatusCode::OK, &claim)
        }
        Err(error) => {
            tracing::debug!(verb, namespace, name, message = %error.message, "claim status write rejected");
            stats.claim_status_rejected.push(RejectedWrite {
                verb,
                name: format!("{namespace}/{name}"),
                code: error.code.as_u16(),
                reason: error.reason.to_string(),
                message: error.message.clone(),
            });
            drop(stats);
            error.into_response()
        }
    }
}

/// `PUT .../resourceclaims/{name}/status`.
pub(crate) async fn replace_status(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let outcome = decode::<ResourceClaim>(&headers, &body).and_then(|claim| {
        state.store.replace_claim_status(
            &namespace,
            &name,
            decodable(claim)?,
            is_dry_run(query.as_deref()),
        )
    });
    finish(&state, "update", &namespace, &name, outcome)
}

/// `PATCH .../resourceclaims/{name}/status` with a merge or JSON patch.
pub(crate) async fn patch_status(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let outcome = patch_object::<ResourceClaim>(
        &headers,
        &body,
        || state.store.get(&namespace, &name),
        |patched| {
            state.store.replace_claim_status(
                &namespace,
                &name,
                decodable(patched)?,
                is_dry_run(query.as_deref()),
            )
        },
    );
    finish(&state, "patch", &namespace, &name, outcome)
}
