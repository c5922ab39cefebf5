//! The node's label followed across API-server outages: each outage is
//! one WARN and each recovery one INFO, every outage (a watch that resumes
//! brings no event until the node changes, so the recovery is not left
//! to one).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use wdp_fake_apiserver::FakeApiServer;

use super::*;

const NODE: &str = "node-1";
/// Long enough for a loaded 2-core machine; every wait ends at its event.
const PATIENCE: Duration = Duration::from_secs(20);
const LABEL: &str = "example.com/config";
const LOST: &str = "cannot watch the node's labels";
const BACK: &str = "watching the node's labels works again";

/// Every formatted log line of this thread's subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn count(&self, text: &str) -> usize {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .filter(|line| line.contains(text))
            .count()
    }

    /// Waits until `text` was logged `times` times.
    async fn logged(&self, text: &str, times: usize) {
        within(&format!("{text:?} logged {times} times"), async {
            while self.count(text) < times {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert_eq!(self.count(text), times, "{text:?}");
    }
}

/// Runs `future` with a deadline, panicking with `what` when it passes.
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {PATIENCE:?}"))
}

fn node(value: &str) -> k8s_openapi::api::core::v1::Node {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": NODE, "labels": {LABEL: value}}
    }))
    .unwrap()
}

#[tokio::test]
async fn every_outage_and_every_recovery_is_logged_once() {
    let captured = Captured::default();
    let writer = captured.clone();
    // This thread's subscriber: the current-thread runtime polls every
    // task here.
    let _logging = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let server = FakeApiServer::start()
        .await
        .expect("the fake API server starts");
    let kubeconfig_dir = tempfile::tempdir().expect("a temporary folder");
    let kubeconfig = kubeconfig_dir.path().join("kubeconfig");
    server
        .write_kubeconfig(&kubeconfig)
        .expect("the kubeconfig is written");
    let client = wdp_dra_client::client(Some(&kubeconfig))
        .await
        .expect("a client from the kubeconfig");
    server.put_node(node("a"));
    let stop = CancellationToken::new();
    let mut values = watch_node_label(client, NODE, LABEL, stop.clone());
    within(
        "the label",
        values.wait_for(|v| *v == NodeLabel::Value(Some("a".into()))),
    )
    .await
    .unwrap();
    for outage in 1..=3 {
        server.set_refusing(true);
        captured.logged(LOST, outage).await;
        server.set_refusing(false);
        captured.logged(BACK, outage).await;
    }
    // A change after the last recovery still arrives.
    server.put_node(node("b"));
    within(
        "the new label",
        values.wait_for(|v| *v == NodeLabel::Value(Some("b".into()))),
    )
    .await
    .unwrap();
    assert_eq!(captured.count(LOST), 3);
    assert_eq!(captured.count(BACK), 3);
    stop.cancel();
}
