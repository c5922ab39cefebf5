//! The linker every guest is pre-linked with: the host imports
//! ([`crate::imports`]), the `types` instance, and WASI p2 served from an
//! empty context ([`crate::wasi_context`]) with its blocking functions
//! turned into traps ([`BlockingDenied`]).

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::wasm_device_plugin::policy::{claim as wit_claim, hardware, host};
use crate::bindings::wit_types;
use crate::call_state::CallState;

/// The version of `wasi:io` that wasmtime-wasi 48 links; its blocking
/// functions are replaced by traps (see [`deny_blocking`]).
const WASI_IO_POLL: &str = "wasi:io/poll@0.2.12";

/// What the guest is told when it tries to block the host thread.
#[derive(Debug, thiserror::Error)]
#[error("the guest tried to block (sleep or wait on a pollable), which policy guests may not do")]
pub(crate) struct BlockingDenied;

/// The linker every guest is pre-linked with: `host`, `hardware`, `types`,
/// `claim`, and WASI p2 (served from an empty context, with blocking functions
/// turned into traps).
pub(crate) fn linker(engine: &Engine) -> wasmtime::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    deny_blocking(&mut linker)?;
    host::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    hardware::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    wit_types::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
    wit_claim::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |state| state)?;
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
