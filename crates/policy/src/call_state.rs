//! The data of a call's store: who is calling what ([`CallInfo`]), the
//! guest's WASI context, its resource limiter, and what the call has
//! logged and written to stderr so far ([`CallState`]).

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::claim::{ClaimInfo, SharedClaim};
use crate::hook::Hook;
use crate::limiter::CallLimiter;
use crate::services::HostServices;
use crate::wasi_context::{StderrTail, empty_context};

/// Who is calling what, for the host imports and log lines.
pub(crate) struct CallInfo {
    pub(crate) guest: Arc<str>,
    pub(crate) hook: Option<Hook>,
    pub(crate) resource: String,
    pub(crate) services: Arc<dyn HostServices>,
    pub(crate) config: Arc<Vec<(String, String)>>,
    /// What the `claim` import returns (DRA prepare calls only).
    pub(crate) claim: SharedClaim,
}

/// The data of one short-lived store (one call).
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) info: CallInfo,
    /// Log lines written in this call (see [`crate::imports`]).
    pub(crate) log_lines: u32,
    stderr: StderrTail,
}

impl CallState {
    pub(crate) fn new(info: CallInfo, memory_bytes: u64) -> Self {
        let stderr = StderrTail::default();
        Self {
            wasi: empty_context(stderr.clone()),
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
        self.limiter.rearm(memory_bytes);
        self.log_lines = 0;
        self.stderr.clear();
    }

    /// What the guest wrote to stderr (bounded), trimmed.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.contents()
    }

    /// The claim this call serves, if any.
    pub(crate) fn claim(&self) -> Option<&ClaimInfo> {
        self.info.claim.as_deref()
    }

    /// The WIT interface of the hook called, for log lines.
    pub(crate) fn hook_name(&self) -> &'static str {
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
