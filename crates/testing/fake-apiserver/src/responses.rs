//! The JSON answers of the handlers: a body with a status code, and the `<Kind>List` body of
//! lists and collection deletes.

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::kinds::StoredKind;
use crate::status::ApiError;

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

/// A `kind: <Kind>List` body.
pub(crate) fn list_body<K: StoredKind>(items: &[K], resource_version: u64) -> serde_json::Value {
    json!({
        "apiVersion": K::API_VERSION,
        "kind": format!("{}List", K::KIND),
        "metadata": {"resourceVersion": resource_version.to_string()},
        "items": items,
    })
}
