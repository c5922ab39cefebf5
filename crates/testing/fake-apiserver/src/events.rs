//! Core/v1 Events over HTTP: `POST /api/v1/namespaces/{namespace}/events`
//! keeps each Event as written (named from `generateName` when it has no
//! name), what a host posts on its Node; tests read them back and wait
//! for one ([`crate::FakeApiServer::wait_for_events`]).

use std::sync::Mutex;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Event;
use tokio::sync::watch;

use crate::app_state::AppState;
use crate::responses::json_response;
use crate::status::ApiError;

/// The Events posted so far, in order.
#[derive(Debug)]
pub(crate) struct EventLog {
    events: Mutex<Vec<Event>>,
    /// How many were posted; waits watch it.
    posted: watch::Sender<usize>,
}

impl Default for EventLog {
    fn default() -> Self {
        Self {
            events: Mutex::default(),
            posted: watch::channel(0).0,
        }
    }
}

impl EventLog {
    /// Every Event posted, in order.
    pub(crate) fn all(&self) -> Vec<Event> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Waits until `pred` holds for the Events (checked now and after each
    /// post); the Events last seen on timeout.
    pub(crate) async fn until<F: Fn(&[Event]) -> bool>(
        &self,
        pred: F,
        timeout: Duration,
    ) -> Result<Vec<Event>, Vec<Event>> {
        let mut posted = self.posted.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            posted.borrow_and_update();
            let events = self.all();
            if pred(&events) {
                return Ok(events);
            }
            if !matches!(
                tokio::time::timeout_at(deadline, posted.changed()).await,
                Ok(Ok(()))
            ) {
                return Err(self.all());
            }
        }
    }
}

/// `POST /api/v1/namespaces/{namespace}/events`.
pub(crate) async fn create_event(
    State(state): State<AppState>,
    Path(namespace): Path<String>,
    body: Bytes,
) -> Response {
    let mut event: Event = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(error) => return ApiError::bad_request(error.to_string()).into_response(),
    };
    let log = &state.store.events;
    let mut events = log
        .events
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if event.metadata.name.is_none() {
        let prefix = event.metadata.generate_name.clone().unwrap_or_default();
        event.metadata.name = Some(format!("{prefix}{:05}", events.len()));
    }
    event.metadata.namespace = Some(namespace);
    events.push(event.clone());
    log.posted.send_replace(events.len());
    drop(events);
    json_response(StatusCode::CREATED, &event)
}
