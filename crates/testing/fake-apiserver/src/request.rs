//! What the write handlers read from a request besides the path: the JSON body decoded into an
//! object (YAML and protobuf bodies get 415), and the `dryRun` query parameter.

use axum::http::{HeaderMap, header};

use crate::query::query_map;
use crate::status::ApiError;

/// The body as a JSON object of type `T`; YAML or protobuf bodies get 415.
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<T, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    if !content_type.starts_with("application/json") {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    serde_json::from_slice(body).map_err(|error| {
        ApiError::bad_request(format!("the request body is not a valid object: {error}"))
    })
}

/// Whether the query asks for a dry run (`dryRun=All`).
pub(crate) fn is_dry_run(query: Option<&str>) -> bool {
    query_map(query).get("dryRun").is_some_and(|v| v == "All")
}
