//! The operator's HTTP endpoint: `/metrics`, `/healthz` (the process
//! answers) and `/readyz` (every resource is registered, every DRA
//! driver's slices published; else one line per resource saying why; a
//! warning line for a DRA driver whose API server drops device taints).
//!
//! `/metrics` speaks the Prometheus text format 0.0.4 unless the scraper's
//! `Accept` header prefers OpenMetrics 1.0 (Prometheus itself asks for it by
//! default; `curl`, `promtool check metrics` pipelines and older agents do
//! not).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
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

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

async fn metrics(State(host): State<Arc<Host>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|value| value.to_str().ok());
    // The registry encodes OpenMetrics; the text format is derived from it.
    let openmetrics = host.metrics().encode();
    let (content_type, body) = if wants_openmetrics(accept) {
        (OPENMETRICS, openmetrics)
    } else {
        (PROMETHEUS_TEXT, prometheus_text(&openmetrics))
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::VARY, "Accept"),
        ],
        body,
    )
}

/// True when the `Accept` header ranks OpenMetrics at least as high as the
/// Prometheus text format (q-values honoured, the most specific range
/// deciding for text). No header, or one that names neither, gets text.
fn wants_openmetrics(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let mut openmetrics: Option<f32> = None;
    let (mut text_plain, mut text_any, mut any): (Option<f32>, Option<f32>, Option<f32>) =
        (None, None, None);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .and_then(|(_, v)| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        let slot = match media.as_str() {
            "application/openmetrics-text" => &mut openmetrics,
            "text/plain" => &mut text_plain,
            "text/*" => &mut text_any,
            "*/*" => &mut any,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    let text = text_plain.or(text_any).or(any).unwrap_or(0.0);
    openmetrics.is_some_and(|q| q > 0.0 && q >= text)
}

/// Rewrites the registry's OpenMetrics exposition as Prometheus text 0.0.4:
/// counter families are named after their `_total` samples, and the
/// OpenMetrics-only `# UNIT` and `# EOF` lines go. Samples are identical in
/// both formats for the counters, gauges and histograms this host records.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .filter(|(_, kind)| kind.trim() == "counter")
        .map(|(name, _)| name)
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|prefix| Some((prefix, line.strip_prefix(prefix)?)));
        match descriptor {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let suffix = if counters.contains(name) {
                    "_total"
                } else {
                    ""
                };
                out.push_str(&format!("{prefix}{name}{suffix} {tail}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

async fn ready(State(host): State<Arc<Host>>) -> impl IntoResponse {
    let status = host.status().await;
    let waiting = host.not_ready().await;
    // Not a reason to stop the rollout, but an operator must see it: the
    // cluster silently keeps unhealthy devices schedulable.
    let warnings: String = host
        .dra_status()
        .await
        .into_values()
        .filter(|(_, publish)| publish.taints_dropped)
        .map(|(driver, _)| {
            format!(
                "warning: DRA driver {driver}: the API server drops device taints \
                 (feature gate DRADeviceTaints off, before Kubernetes 1.37): \
                 unhealthy devices stay schedulable\n"
            )
        })
        .collect();
    if waiting.is_empty() {
        (
            StatusCode::OK,
            format!("ready: {} resources registered\n{warnings}", status.len()),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready:\n{}\n{warnings}", waiting.join("\n")),
        )
    }
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
