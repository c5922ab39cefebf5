//! A PATCH request on one object: the content types served (`application/merge-patch+json` and
//! `application/json-patch+json`; strategic merge patch and server-side apply answer 415), the
//! patch applied to the current object, and the write retried on the newer object when another
//! write landed in between, unless the patch names the resourceVersion (then the conflict is the
//! answer), as the real server does.

use axum::http::{HeaderMap, header};
use serde_json::Value;

use crate::kinds::StoredKind;
use crate::patch::{json_patch, merge_patch};
use crate::status::ApiError;

/// How often a patch is retried when another write lands between its read and its write.
const PATCH_ATTEMPTS: usize = 5;

/// Applies the patch in `body` to what `current` reads and hands the result to `write`.
pub(crate) fn patch_object<K: StoredKind>(
    headers: &HeaderMap,
    body: &[u8],
    mut current: impl FnMut() -> Result<K, ApiError>,
    mut write: impl FnMut(K) -> Result<K, ApiError>,
) -> Result<K, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let is_merge = content_type.starts_with("application/merge-patch+json");
    if !is_merge && !content_type.starts_with("application/json-patch+json") {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let patch: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
    // A patch that names the resourceVersion is checked against it instead of being retried.
    let pins_version = if is_merge {
        patch.pointer("/metadata/resourceVersion").is_some()
    } else {
        patch.to_string().contains("/metadata/resourceVersion")
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut merged = serde_json::to_value(current()?)
            .map_err(|e| ApiError::internal(&format!("encoding the object: {e}")))?;
        if is_merge {
            merge_patch(&mut merged, &patch);
        } else {
            json_patch(&mut merged, &patch).map_err(|why| {
                ApiError::unprocessable(format!("the JSON patch could not be applied: {why}"))
            })?;
        }
        let patched: K = serde_json::from_value(merged).map_err(|e| {
            ApiError::bad_request(format!(
                "the patched object is not a valid {}: {e}",
                K::KIND
            ))
        })?;
        match write(patched) {
            Ok(written) => return Ok(written),
            // Someone wrote in between: patch the newer object, as the real server does.
            Err(error)
                if error.reason == "Conflict" && !pins_version && attempt < PATCH_ATTEMPTS => {}
            Err(error) => return Err(error),
        }
    }
}
