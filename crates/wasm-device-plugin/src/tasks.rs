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
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    Ok(())
}
