//! The WASI p2 context guests get: empty (no files, environment,
//! arguments or network), with clocks frozen at zero, stdin closed, stdout
//! discarded and stderr kept, bounded, to explain a trap.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// How much of a guest's stderr is kept to explain a trap.
const STDERR_TAIL: usize = 2048;

/// An empty WASI context whose stderr goes to `stderr`.
pub(crate) fn empty_context(stderr: StderrTail) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder
        .stderr(stderr)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
    builder.build()
}

/// Clocks that never move: guests get no ambient clock.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> std::time::Duration {
        std::time::Duration::from_secs(1)
    }

    fn now(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }

    fn now(&self) -> u64 {
        0
    }
}

/// Keeps the first [`STDERR_TAIL`] bytes a guest writes to stderr (a Rust
/// guest's panic message lands there) and silently drops the rest.
#[derive(Clone, Default)]
pub(crate) struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    pub(crate) fn contents(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    pub(crate) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn push(&self, bytes: &[u8]) {
        let mut buffer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let room = STDERR_TAIL.saturating_sub(buffer.len());
        buffer.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASIp2 guests run here; their writes go through `p2_stream`.
        Box::new(tokio::io::sink())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}
