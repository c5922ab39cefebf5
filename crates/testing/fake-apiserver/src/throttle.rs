//! An overloaded API server: ResourceSlice writes answered with 429 or a 5xx and a
//! `Retry-After` header, and the log of every write request with its arrival time and answer,
//! so tests can check when a client came back.
//!
//! The real server answers in two shapes, both simulated: API Priority and Fairness rejects with
//! `429`, `Retry-After` and a plain-text body (no `Status`), while `apierrors.NewTooManyRequests`
//! and the timeout errors send a `Status` whose `details.retryAfterSeconds` repeats the header.

use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use axum::extract::Request;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// How the next ResourceSlice writes are refused (see [`crate::FakeApiServer::throttle_writes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Throttle {
    /// The HTTP status: 429, or a 5xx such as 500, 503 or 504.
    pub code: u16,
    /// The `Retry-After` header, in seconds.
    pub retry_after_seconds: u32,
    /// How many writes are refused, from the next one on.
    pub count: u32,
    /// The shape of the answer's body.
    pub body: ThrottleBody,
}

/// The body of a throttled answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrottleBody {
    /// A `metav1.Status` with `details.retryAfterSeconds`, as `apierrors.NewTooManyRequests`.
    Status,
    /// `Too many requests, please try again later.` as plain text, as API Priority and Fairness.
    PlainText,
}

/// One ResourceSlice write request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteAttempt {
    /// When it arrived.
    pub at: Instant,
    /// `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The answer's HTTP status.
    pub code: u16,
}

/// The throttle in force and the write log; shared by every generation of the server.
#[derive(Debug, Default)]
pub(crate) struct Throttling {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    throttle: Option<Throttle>,
    attempts: Vec<WriteAttempt>,
}

impl Throttling {
    /// Refuses the next `throttle.count` writes (replacing any throttle still in force).
    pub(crate) fn set(&self, throttle: Throttle) {
        self.lock().throttle = (throttle.count > 0).then_some(throttle);
    }

    /// Every write request so far, in order of arrival.
    pub(crate) fn attempts(&self) -> Vec<WriteAttempt> {
        self.lock().attempts.clone()
    }

    /// Answers a ResourceSlice write itself while throttled, otherwise passes it on; logs it.
    /// Reads pass untouched.
    pub(crate) async fn gate(&self, request: Request, next: Next) -> Response {
        let method = request.method().clone();
        let is_slice_write = method != Method::GET
            && request
                .uri()
                .path()
                .starts_with("/apis/resource.k8s.io/v1/resourceslices");
        if !is_slice_write {
            return next.run(request).await;
        }
        let at = Instant::now();
        let refusal = {
            let mut state = self.lock();
            let refusal = state.throttle.clone();
            if let Some(throttle) = &mut state.throttle {
                throttle.count -= 1;
                if throttle.count == 0 {
                    state.throttle = None;
                }
            }
            refusal
        };
        let response = match refusal {
            Some(throttle) => refuse(&throttle),
            None => next.run(request).await,
        };
        self.lock().attempts.push(WriteAttempt {
            at,
            method: method.to_string(),
            code: response.status().as_u16(),
        });
        response
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The answer to a throttled write.
fn refuse(throttle: &Throttle) -> Response {
    let code = StatusCode::from_u16(throttle.code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let retry_after = throttle.retry_after_seconds.to_string();
    let message = "Too many requests, please try again later.";
    match throttle.body {
        ThrottleBody::PlainText => (
            code,
            [
                (header::RETRY_AFTER, retry_after),
                (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            ],
            format!("{message}\n"),
        )
            .into_response(),
        ThrottleBody::Status => {
            let reason = match code {
                StatusCode::TOO_MANY_REQUESTS => "TooManyRequests",
                StatusCode::GATEWAY_TIMEOUT => "Timeout",
                StatusCode::SERVICE_UNAVAILABLE => "ServiceUnavailable",
                _ => "InternalError",
            };
            let status = json!({
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": reason,
                "code": code.as_u16(),
                "details": {"retryAfterSeconds": throttle.retry_after_seconds},
            });
            (
                code,
                [
                    (header::RETRY_AFTER, retry_after),
                    (header::CONTENT_TYPE, "application/json".to_owned()),
                ],
                status.to_string(),
            )
                .into_response()
        }
    }
}
