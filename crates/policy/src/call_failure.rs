//! Sorting a failed guest call: a wasmtime error from instantiation or a
//! call, with what the call's store saw (a memory limit hit, the guest's
//! stderr), becomes the [`CallError`] the host reports, naming the guest
//! and hook.

use wasmtime::{Store, Trap};

use crate::call_state::CallState;
use crate::context::CallLimits;
use crate::error::CallError;
use crate::hook::Hook;
use crate::linker::BlockingDenied;

/// Sorts a wasmtime error from instantiation or a call into a [`CallError`].
pub(crate) fn classify(
    guest: &str,
    hook: Hook,
    limits: CallLimits,
    store: &Store<CallState>,
    error: wasmtime::Error,
    instantiating: bool,
) -> CallError {
    let guest = guest.to_string();
    if let Some(detail) = &store.data().limiter.exceeded {
        return CallError::OutOfMemory {
            guest,
            hook,
            limit: limits.memory_bytes,
            detail: detail.clone(),
        };
    }
    let trap = error.downcast_ref::<Trap>().copied();
    if trap == Some(Trap::Interrupt) {
        return CallError::Timeout {
            guest,
            hook,
            timeout: limits.timeout,
        };
    }
    if instantiating && trap.is_none() {
        return CallError::Instantiate {
            guest,
            hook,
            detail: format!("{error:#}"),
        };
    }
    let mut detail = if let Some(denied) = error.downcast_ref::<BlockingDenied>() {
        denied.to_string()
    } else if let Some(trap) = trap {
        trap.to_string()
    } else {
        root_cause(&error)
    };
    let stderr = store.data().stderr();
    let stderr = stderr
        .lines()
        .filter(|line| !line.starts_with("note: run with `RUST_BACKTRACE=1`"))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    if !stderr.is_empty() {
        detail.push_str("; guest stderr: ");
        detail.push_str(&stderr);
    }
    tracing::debug!(guest = %guest, hook = %hook, error = ?error, "guest call failed");
    CallError::Trap {
        guest,
        hook,
        detail,
    }
}

fn root_cause(error: &wasmtime::Error) -> String {
    let full = format!("{error:#}");
    full.rsplit(": ").next().unwrap_or(&full).to_string()
}
