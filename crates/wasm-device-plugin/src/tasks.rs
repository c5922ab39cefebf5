//! How the subcommands run their work: blocking work on tokio's blocking
//! pool, and waiting for the signal that stops a long-running command.

use anyhow::Context;

/// Runs blocking, offline work (reading the config directory, loading and
/// calling guests, scanning hardware) on tokio's blocking pool, the way
/// `run`, `test` and `demo` do it: guest calls block, and WASI's stdio
/// (a guest writing to stderr) must not run on an async worker thread.
pub async fn offline<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .context("the offline task panicked")?
}

/// Resolves on SIGTERM or SIGINT.
pub async fn wait_for_signal() -> anyhow::Result<()> {
    StopSignals::install()?.wait().await;
    Ok(())
}

/// SIGTERM and SIGINT, caught from the moment this is made. `run` makes it
/// before the host starts: a signal that comes while the host starts (a
/// pod deleted as it comes up) stops the host cleanly once it has started
/// — sockets removed, calls answered — instead of killing the process with
/// the default action and leaving its sockets behind.
pub struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl StopSignals {
    /// Installs the handlers.
    pub fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        })
    }

    /// Resolves on the first SIGTERM or SIGINT since [`install`](Self::install).
    pub async fn wait(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}
