//! ResourceSlice writes over HTTP: create (POST), replace (PUT), patch (PATCH), delete and
//! delete-collection, each counted in [`Stats`](crate::stats::Stats) when accepted or rejected.
//!
//! PATCH accepts `application/merge-patch+json` (RFC 7386) and `application/json-patch+json`
//! (RFC 6902); strategic merge patch and server-side apply answer 415 Unsupported Media Type.
//! A body with a malformed quantity cannot be decoded and gets 400, as from the real server.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::Value;

use crate::app_state::AppState;
use crate::patch_request::patch_object;
use crate::query::{filter_from, query_map};
use crate::request::{decode, is_dry_run};
use crate::responses::{json_response, list_body};
use crate::stats::RejectedWrite;
use crate::status::ApiError;
use crate::store::Preconditions;
use crate::validation;

/// The verbs counted in [`Stats`](crate::stats::Stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

impl Verb {
    fn as_str(self) -> &'static str {
        match self {
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// Counts the outcome of a write and turns it into the response.
fn finish(
    state: &AppState,
    verb: Verb,
    name: &str,
    outcome: Result<(StatusCode, Value), ApiError>,
) -> Response {
    let mut stats = state.store.stats.lock().unwrap_or_else(|p| p.into_inner());
    match outcome {
        Ok((code, body)) => {
            match verb {
                Verb::Create => stats.slice_creates += 1,
                Verb::Update | Verb::Patch => stats.slice_updates += 1,
                Verb::Delete => stats.slice_deletes += 1,
                Verb::DeleteCollection => stats.slice_collection_deletes += 1,
            }
            drop(stats);
            json_response(code, &body)
        }
        Err(error) => {
            tracing::debug!(verb = verb.as_str(), name, message = %error.message, "slice write rejected");
            stats.rejected.push(RejectedWrite {
                verb: verb.as_str(),
                name: name.to_string(),
                code: error.code.as_u16(),
                reason: error.reason.to_string(),
                message: error.message.clone(),
            });
            drop(stats);
            error.into_response()
        }
    }
}

/// The slice, or 400 when one of its quantities does not parse.
fn decodable(slice: ResourceSlice) -> Result<ResourceSlice, ApiError> {
    match validation::slice_body_problem(&slice) {
        Some(problem) => Err(ApiError::bad_request(format!(
            "ResourceSlice in version \"v1\" cannot be handled as a ResourceSlice: {problem}"
        ))),
        None => Ok(slice),
    }
}

fn to_value(slice: &ResourceSlice) -> Result<Value, ApiError> {
    serde_json::to_value(slice)
        .map_err(|e| ApiError::internal(&format!("encoding the object: {e}")))
}

/// `POST /resourceslices`.
pub(crate) async fn create_slice(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut name = String::new();
    let outcome = decode::<ResourceSlice>(&headers, &body).and_then(|slice| {
        let slice = decodable(slice)?;
        name = slice
            .metadata
            .name
            .clone()
            .or(slice.metadata.generate_name.clone())
            .unwrap_or_default();
        let created = state
            .store
            .create("", slice, is_dry_run(query.as_deref()))?;
        Ok((StatusCode::CREATED, to_value(&created)?))
    });
    finish(&state, Verb::Create, &name, outcome)
}

/// `PUT /resourceslices/{name}`.
pub(crate) async fn replace_slice(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let outcome = decode::<ResourceSlice>(&headers, &body).and_then(|slice| {
        let slice = decodable(slice)?;
        let replaced = state
            .store
            .replace("", &name, slice, is_dry_run(query.as_deref()))?;
        Ok((StatusCode::OK, to_value(&replaced)?))
    });
    finish(&state, Verb::Update, &name, outcome)
}

/// `PATCH /resourceslices/{name}` with a JSON merge patch.
pub(crate) async fn patch_slice(
    State(state): State<AppState>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let outcome = patch(&state, &name, query.as_deref(), &headers, &body);
    finish(&state, Verb::Patch, &name, outcome)
}

fn patch(
    state: &AppState,
    name: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(StatusCode, Value), ApiError> {
    let written = patch_object::<ResourceSlice>(
        headers,
        body,
        || state.store.get("", name),
        |patched| {
            state
                .store
                .replace("", name, decodable(patched)?, is_dry_run(query))
        },
    )?;
    Ok((StatusCode::OK, to_value(&written)?))
}

/// `DELETE /resourceslices/{name}` with optional `DeleteOptions` preconditions.
pub(crate) async fn delete_slice(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let outcome = preconditions(&body).and_then(|preconditions| {
        let deleted = state
            .store
            .delete::<ResourceSlice>("", &name, &preconditions)?;
        Ok((StatusCode::OK, to_value(&deleted)?))
    });
    finish(&state, Verb::Delete, &name, outcome)
}

fn preconditions(body: &[u8]) -> Result<Preconditions, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Preconditions::default());
    }
    let options: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the DeleteOptions body is not valid JSON: {e}"))
    })?;
    let field = |key: &str| {
        options
            .pointer(&format!("/preconditions/{key}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Preconditions {
        uid: field("uid"),
        resource_version: field("resourceVersion"),
    })
}

/// `DELETE /resourceslices` with field and label selectors.
pub(crate) async fn delete_slice_collection(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> Response {
    let outcome = filter_from::<ResourceSlice>(None, &query_map(query.as_deref())).map(|filter| {
        let deleted = state.store.delete_collection::<ResourceSlice>(&filter);
        let version = state.store.list::<ResourceSlice>(&Default::default()).1;
        (StatusCode::OK, list_body(&deleted, version))
    });
    finish(&state, Verb::DeleteCollection, "", outcome)
}
