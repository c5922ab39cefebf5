//! The TCP side: one "generation" of the server is a listening socket, its accept loop and the
//! connections it accepted. Stopping a generation closes the socket and drops every
//! connection (watches included); a restart starts a new generation on the same address.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::app_state::AppState;
use crate::faults::Faults;
use crate::routes::router;
use crate::store::Store;
use crate::throttle::Throttling;

/// A running generation of the server.
#[derive(Debug)]
pub(crate) struct Generation {
    pub(crate) address: SocketAddr,
    stop: CancellationToken,
    accept_loop: JoinHandle<()>,
    connections: TaskTracker,
}

impl Generation {
    /// Listens on `address` (port 0 picks one) and serves until stopped.
    pub(crate) async fn start(
        address: SocketAddr,
        store: Arc<Store>,
        refusing: watch::Receiver<bool>,
        throttling: Arc<Throttling>,
        faults: Arc<Faults>,
    ) -> io::Result<Self> {
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        // A restart binds the port again while the old connections sit in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        socket.bind(address)?;
        let listener = socket.listen(1024)?;
        let address = listener.local_addr()?;
        let stop = CancellationToken::new();
        let connections = TaskTracker::new();
        let app = router(AppState {
            store,
            refusing,
            throttling,
            faults,
            stop: stop.clone(),
        });
        let accept_loop = tokio::spawn(accept(listener, app, stop.clone(), connections.clone()));
        Ok(Self {
            address,
            stop,
            accept_loop,
            connections,
        })
    }

    /// Signals the accept loop, every connection and every watch to end, without waiting.
    pub(crate) fn signal_stop(&self) {
        self.stop.cancel();
    }

    /// Stops and waits until the socket is closed and every connection is dropped.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        // The loop only ends by cancellation; a panic in it would already have closed the socket.
        let _ = self.accept_loop.await;
        self.connections.close();
        self.connections.wait().await;
    }
}

async fn accept(
    listener: TcpListener,
    app: axum::Router,
    stop: CancellationToken,
    connections: TaskTracker,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => stream,
            Err(error) => {
                // Per-connection failures (e.g. the peer reset before accept) are not fatal.
                tracing::debug!(%error, "accepting a connection failed");
                continue;
            }
        };
        let service = TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        connections.spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                }
            }
        });
    }
}
