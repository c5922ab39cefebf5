//! Carries an answer's `Retry-After` header into the `Status` body kube-rs parses.
//!
//! kube-rs turns a failed answer into `kube::Error::Api(Status)` from the body alone; the
//! headers are dropped. The API server sends `Retry-After` in two shapes: with a `Status` whose
//! `details.retryAfterSeconds` repeats it (`apierrors.NewTooManyRequests`, timeouts), and with
//! a plain-text body and the header only (API Priority and Fairness rejecting a request, the
//! commonest 429). [`RetryAfterLayer`] sits outermost in the client's stack and, for a 429 or
//! 5xx answer with a `Retry-After` in seconds, rewrites the body into a `Status` that carries
//! the header's value in `details.retryAfterSeconds` (keeping the server's own `Status`, or its
//! text as the message). Callers then read one place: [`crate::ApiError::retry_after`]. An
//! HTTP-date `Retry-After` (which the API server never sends) is left alone.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http_body_util::{BodyExt, Either, Full};
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tower::{Layer, Service};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The layer that makes [`RetryAfterService`]s.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RetryAfterLayer;

impl<S> Layer<S> for RetryAfterLayer {
    type Service = RetryAfterService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RetryAfterService { inner }
    }
}

/// Wraps the client's service (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct RetryAfterService<S> {
    inner: S,
}

impl<S, RequestBody, B> Service<Request<RequestBody>> for RetryAfterService<S>
where
    S: Service<Request<RequestBody>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<Either<B, Full<Bytes>>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<RequestBody>) -> Self::Future {
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await.map_err(Into::into)?;
            let Some(seconds) = retry_after_seconds(&response) else {
                return Ok(response.map(Either::Left));
            };
            let (mut parts, body) = response.into_parts();
            let body = body.collect().await.map_err(Into::into)?.to_bytes();
            let status = status_with_retry_after(parts.status, &body, seconds);
            let body = Bytes::from(status.to_string());
            parts.headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            parts
                .headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(body.len()));
            Ok(Response::from_parts(parts, Either::Right(Full::new(body))))
        })
    }
}

/// The `Retry-After` seconds of a 429 or 5xx answer, if it has them.
fn retry_after_seconds<B>(response: &Response<B>) -> Option<u32> {
    let code = response.status();
    if code != StatusCode::TOO_MANY_REQUESTS && !code.is_server_error() {
        return None;
    }
    response
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The answer as a `Status` whose `details.retryAfterSeconds` is at least `seconds`.
pub(crate) fn status_with_retry_after(code: StatusCode, body: &[u8], seconds: u32) -> Value {
    let mut status = match serde_json::from_slice::<Value>(body) {
        Ok(value) if value.get("kind").and_then(Value::as_str) == Some("Status") => value,
        _ => json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": String::from_utf8_lossy(body).trim(),
            "reason": reason_of(code),
            "code": code.as_u16(),
        }),
    };
    let details = status
        .as_object_mut()
        .map(|object| object.entry("details").or_insert_with(|| json!({})));
    if let Some(Value::Object(details)) = details {
        let given = details
            .get("retryAfterSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        details.insert(
            "retryAfterSeconds".to_owned(),
            json!(given.max(u64::from(seconds))),
        );
    }
    status
}

/// The `Status` reason the API server uses for `code`.
fn reason_of(code: StatusCode) -> &'static str {
    match code {
        StatusCode::TOO_MANY_REQUESTS => "TooManyRequests",
        StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
        StatusCode::GATEWAY_TIMEOUT => "Timeout",
        _ => "InternalError",
    }
}

#[cfg(test)]
#[path = "retry_after_tests.rs"]
mod tests;
