//! Per-call store state, the host imports, the resource limiter and the
//! shared linker (host imports + WASI with an empty context).

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};
use wasmtime_wasi::{
    HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView,
};

use crate::bindings::wasm_device_plugin::policy::{hardware, host};
use crate::bindings::wit_types;
use crate::types::Candidate;
use crate::{Hook, HostServices};

/// The longest log line a guest may write; longer ones are cut.
const MAX_LOG_LINE: usize = 4096;
/// How many log lines one call may write; further lines are dropped.
const MAX_LOG_LINES: u32 = 256;
/// How much of a guest's stderr is kept to explain a trap.
const STDERR_TAIL: usize = 2048;
/// Most table elements a guest may have.
const MAX_TABLE_ELEMENTS: usize = 100_000;
/// Most core instances, tables and memories in one store.
const MAX_INSTANCES: usize = 64;
const MAX_TABLES: usize = 64;
const MAX_MEMORIES: usize = 16;

/// The version of `wasi:io` that wasmtime-wasi 48 links; its blocking
/// functions are replaced by traps (see [`deny_blocking`]).
const WASI_IO_POLL: &str = "wasi:io/poll@0.2.12";

/// What the guest is told when it tries to block the host thread.
#[derive(Debug, thiserror::Error)]
#[error("the guest tried to block (sleep or wait on a pollable), which policy guests may not do")]
pub(crate) struct BlockingDenied;

/// Who is calling what, for the host imports and log lines.
pub(crate) struct CallInfo {
    pub(crate) guest: Arc<str>,
    pub(crate) hook: Option<Hook>,
    pub(crate) resource: String,
    pub(crate) services: Arc<dyn HostServices>,
    pub(crate) config: Arc<Vec<(String, String)>>,
    /// What the `claim` import returns (DRA prepare calls only).
    pub(crate) claim: crate::claim::SharedClaim,
}

/// The data of one short-lived store (one call).
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    info: CallInfo,
    log_lines: u32,
    stderr: StderrTail,
}

impl CallState {
    pub(crate) fn new(info: CallInfo, memory_bytes: u64) -> Self {
        let stderr = StderrTail::default();
        let mut builder = WasiCtxBuilder::new();
        builder
            .stderr(stderr.clone())
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        Self {
            wasi: builder.build(),
            table: ResourceTable::new(),
            limiter: CallLimiter::new(memory_bytes),
            info,
            log_lines: 0,
            stderr,
        }
    }

    /// Readies the state of a warm instance for its next call: who calls,
    /// the call's memory cap, and a clean log count, stderr and limit flag.
    pub(crate) fn rearm(&mut self, info: CallInfo, memory_bytes: u64) {
        self.info = info;
        self.limiter.memory_bytes = usize::try_from(memory_bytes).unwrap_or(usize::MAX);
        self.limiter.exceeded = None;
        self.log_lines = 0;
        self.stderr.clear();
    }

    /// What the guest wrote to stderr (bounded), trimmed.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.contents()
    }

    /// The claim this call serves, if any.
    pub(crate) fn claim(&self) -> Option<&crate::claim::ClaimInfo> {
        self.info.claim.as_deref()
    }

    fn hook_name(&self) -> &'static str {
        self.info.hook.map_or("load-check", Hook::interface)
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl host::Host for CallState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        self.log_lines += 1;
        if self.log_lines > MAX_LOG_LINES {
            if self.log_lines == MAX_LOG_LINES + 1 {
                tracing::warn!(
                    guest = %self.info.guest,
                    hook = self.hook_name(),
                    resource = %self.info.resource,
                    "guest log line limit ({MAX_LOG_LINES} per call) reached; dropping further lines"
                );
            }
            return;
        }
        let message = truncate(&message, MAX_LOG_LINE);
        let guest = &*self.info.guest;
        let hook = self.hook_name();
        let resource = self.info.resource.as_str();
        match level {
            host::LogLevel::Trace => tracing::trace!(guest, hook, resource, "{message}"),
            host::LogLevel::Debug => tracing::debug!(guest, hook, resource, "{message}"),
            host::LogLevel::Info => tracing::info!(guest, hook, resource, "{message}"),
            host::LogLevel::Warn => tracing::warn!(guest, hook, resource, "{message}"),
            host::LogLevel::Error => tracing::error!(guest, hook, resource, "{message}"),
        }
    }

    fn config(&mut self) -> Vec<(String, String)> {
        (*self.info.config).clone()
    }
}

impl hardware::Host for CallState {
    fn candidates(&mut self) -> Vec<Candidate> {
        self.info.services.candidates()
    }

    fn read_attribute(&mut self, candidate_id: String, name: String) -> Result<String, String> {
        self.info.services.read_attribute(&candidate_id, &name)
    }

    fn write_attribute(
        &mut self,
        candidate_id: String,
        name: String,
        value: String,
    ) -> Result<(), String> {
        self.info
            .services
            .write_attribute(&candidate_id, &name, &value)
    }
}

fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Caps memories and tables of one store and remembers when a cap was hit
/// (a failed `memory.grow` usually ends in a trap; the flag tells the two
/// apart).
pub(crate) struct CallLimiter {
    memory_bytes: usize,
    pub(crate) exceeded: Option<String>,
    /// Bytes of linear memory the instance holds (all its memories).
    pub(crate) held_bytes: usize,
}

impl CallLimiter {
    fn new(memory_bytes: u64) -> Self {
        Self {
            memory_bytes: usize::try_from(memory_bytes).unwrap_or(usize::MAX),
            exceeded: None,
            held_bytes: 0,
        }
    }

    /// Whether the instance's memory fits a cap of `memory_bytes`.
    pub(crate) fn fits(&self, memory_bytes: u64) -> bool {
        u64::try_from(self.held_bytes).is_ok_and(|held| held <= memory_bytes)
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes || maximum.is_some_and(|max| desired > max) {
            self.exceeded = Some(format!(
                "memory growth from {current} to {desired} bytes refused"
            ));
            return Ok(false);
        }
        self.held_bytes = self
            .held_bytes
            .saturating_add(desired.saturating_sub(current));
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded = Some(format!("memory growth failed: {error:#}"));
        Ok(())
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > MAX_TABLE_ELEMENTS || maximum.is_some_and(|max| desired > max) {
            self.exceeded = Some(format!(
                "table growth from {current} to {desired} elements refused"
            ));
            return Ok(false);
        }
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.exceeded = Some(format!("table growth failed: {error:#}"));
        Ok(())
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
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
struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    fn contents(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).trim().to_string()
    }

    fn clear(&self) {
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

/// The linker every guest is pre-linked with: `host`, `hardware`, `types`,
/// `claim`,
/// and WASI p2 (served from an empty context, with blocking functions
/// turned into traps).
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    deny_blocking(&mut linker)?;
    host::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    hardware::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    wit_types::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    crate::claim::add_to_linker(&mut linker)?;
    Ok(linker)
}

/// Epoch interruption cannot stop a thread blocked inside a host function,
/// so `wasi:io/poll.poll` and `pollable.block` (a sleep, a wait) trap
/// instead of blocking.
fn deny_blocking(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    {
        let mut poll = linker.instance(WASI_IO_POLL)?;
        poll.func_new("poll", |_store, _ty, _params, _results| {
            Err(wasmtime::Error::new(BlockingDenied))
        })?;
        poll.func_new(
            "[method]pollable.block",
            |_store, _ty, _params, _results| Err(wasmtime::Error::new(BlockingDenied)),
        )?;
    }
    linker.allow_shadowing(false);
    Ok(())
}
