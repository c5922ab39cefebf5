//! The operator's HTTP endpoint: `/metrics` (Prometheus text), `/healthz`
//! (the process answers) and `/readyz` (every resource is registered).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use wdp_host::Host;

/// Binds `addr` and serves in the background.
pub async fn serve(addr: SocketAddr, host: Arc<Host>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics-addr {addr}: cannot listen"))?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(host);
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "metrics server stopped");
        }
    });
    Ok(())
}

async fn metrics(State(host): State<Arc<Host>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        host.metrics().encode(),
    )
}

async fn ready(State(host): State<Arc<Host>>) -> impl IntoResponse {
    let status = host.status().await;
    let waiting: Vec<&String> = status
        .iter()
        .filter(|(_, (registered, _))| !registered)
        .map(|(name, _)| name)
        .collect();
    if waiting.is_empty() {
        (
            StatusCode::OK,
            format!("ready: {} resources registered\n", status.len()),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not registered yet: {waiting:?}\n"),
        )
    }
}
