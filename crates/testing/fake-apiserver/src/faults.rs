//! Faults a client must survive besides outages and throttling: bearer
//! tokens the server accepts (a service-account token rotated on disk must
//! be picked up by the client), claim reads answered with a body that is
//! not JSON (a proxy's error page, a truncated answer) and claim status
//! writes never answered (a server that hangs mid-request).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::status::ApiError;

/// The fault switches of a server, kept across restarts.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// `Some`: only requests bearing one of these tokens pass; others get 401.
    tokens: Mutex<Option<BTreeSet<String>>>,
    /// Every distinct bearer token received, in order of first arrival.
    seen: Mutex<Vec<String>>,
    /// Claim reads answer 200 with a body that is not JSON.
    garbage_claims: AtomicBool,
    /// Claim status writes get no answer.
    hung_status_writes: AtomicBool,
}

impl Faults {
    pub(crate) fn require_tokens(&self, tokens: Option<&[&str]>) {
        *self.tokens.lock().unwrap_or_else(|p| p.into_inner()) =
            tokens.map(|t| t.iter().map(|s| (*s).to_owned()).collect());
    }

    pub(crate) fn tokens_seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set_garbage_claims(&self, on: bool) {
        self.garbage_claims.store(on, Ordering::SeqCst);
    }

    pub(crate) fn set_hung_status_writes(&self, on: bool) {
        self.hung_status_writes.store(on, Ordering::SeqCst);
    }

    /// Whether `request` is a claim status write left unanswered.
    pub(crate) fn hangs(&self, request: &Request) -> bool {
        let path = request.uri().path();
        self.hung_status_writes.load(Ordering::SeqCst)
            && request.method() != axum::http::Method::GET
            && path.contains("/resourceclaims/")
            && path.ends_with("/status")
    }

    /// The answer a fault gives `request`, if any.
    pub(crate) fn answer(&self, request: &Request) -> Option<Response> {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .map(|token| token.trim().to_owned());
        if let Some(token) = &bearer {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if !seen.contains(token) {
                seen.push(token.clone());
            }
        }
        let accepted = self
            .tokens
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_none_or(|tokens| bearer.is_some_and(|t| tokens.contains(&t)));
        if !accepted {
            return Some(ApiError::unauthorized().into_response());
        }
        if self.garbage_claims.load(Ordering::SeqCst)
            && request.method() == axum::http::Method::GET
            && request.uri().path().contains("/resourceclaims")
        {
            return Some(
                (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, "application/json")],
                    "<html><body>502 Bad Gateway</body></html",
                )
                    .into_response(),
            );
        }
        None
    }
}
