//! The sandboxed runtime for wasm-device-plugin policy guests.
//!
//! Per-device policy (which devices to advertise, whether they are healthy,
//! which to hand out together, what a container receives, what to check
//! before it starts and, for resources served through DRA, how devices
//! split into partitions, what preparing a claim creates and undoes, which
//! taints a device carries) runs as WebAssembly components written against
//! the WIT package `wasm-device-plugin:policy@0.1.3` (`wit/policy.wit`).
//! This crate hosts them: one [`PolicyEngine`] (a wasmtime engine with the
//! component model, epoch interruption and the pooling allocator, plus an
//! epoch ticker thread) loads guests with [`PolicyEngine::load_file`] —
//! compiled once per content hash, their exports checked against the eleven
//! hooks ([`Hook::ALL`]) of a compatible WIT version (any 0.1.x: guests
//! built against 0.1.0 to 0.1.2 load unchanged), their imports against
//! what the host provides, pre-linked once — and every hook call on a
//! [`Guest`] runs under a deadline and a memory cap ([`CallLimits`]), in a
//! fresh store or, when the caller names the device-set generation
//! ([`CallContext::generation`]), in an instance kept warm from an earlier
//! call of the same guest and generation. A trap, a timeout, an
//! out-of-memory or a guest's `Err` fails that call only, as a
//! [`CallError`] naming the guest and the hook; a trap, timeout or
//! out-of-memory also throws the instance away.
//!
//! The hooks: [`Guest::discover`], [`Guest::check_health`],
//! [`Guest::choose`] (and [`Guest::choose_by_index`]), [`Guest::allocate`],
//! [`Guest::pre_start`], and, added in WIT 0.1.2 for DRA resources,
//! [`Guest::describe_layout`] (counter sets, partitions, consumable
//! capacity: [`Layout`]), [`Guest::dra_prepare`] and
//! [`Guest::dra_unprepare`] (create and remove what a claim's
//! [`ClaimDevice`]s need, answering their [`DeviceStatus`]) and
//! [`Guest::device_taints`] ([`Tainted`]); added in WIT 0.1.3,
//! [`Guest::device_taints_v2`] ([`TaintedV2`]: the `none` effect, up to 16
//! taints a device; [`Guest::taints`] asks it, or `device-taints` for a
//! guest without it) and [`Guest::may_bind`] (a guest's say, as a
//! [`BindRequest`], before the host binds devices to another kernel
//! driver).
//!
//! Guests get the `host` and `hardware` imports (served by the caller's
//! [`HostServices`]), the `claim` import (the DRA claim of a prepare call,
//! [`CallContext::claim`], added in WIT 0.1.1; `claim.devices`, the
//! claim's devices ([`ClaimInfo::devices`]), added in 0.1.2) and the WASI
//! p2 imports their toolchains add, served from an empty context: no
//! files, no environment, no arguments, no network, clocks frozen at zero,
//! stdin closed, stdout discarded, stderr kept (bounded) only to explain a
//! trap. Blocking WASI calls (sleeping, waiting on a pollable) trap, since
//! an epoch deadline cannot interrupt a blocked host thread.
//!
//! The data types in [`types`] mirror the WIT records one to one; the host
//! never handles generated binding types.
//!
//! Calls are synchronous: from async code run them in
//! `tokio::task::spawn_blocking`, or, for a guest that cannot block in a
//! host import ([`Guest::may_block_in_host`]), in
//! `tokio::task::block_in_place` on a multi-thread runtime.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

mod bindings;
mod call_failure;
mod call_state;
mod claim;
mod compiled_cache;
mod context;
mod engine;
pub mod error;
mod exports;
mod guest;
mod hook;
mod imports;
mod indexed;
mod indexed_export;
mod key_kind;
mod limiter;
mod linker;
mod observer;
mod precompiled;
mod prepared;
mod services;
mod shared;
pub mod signature;
mod ticker;
pub mod types;
mod warm;
mod wasi_context;

pub use claim::ClaimInfo;
pub use compiled_cache::CacheStats;
pub use context::{CallContext, CallLimits};
pub use engine::{
    DEFAULT_UNUSED_CACHE_BYTES, EngineSettings, MAX_GUEST_FILE_BYTES, PolicyEngine, guest_file_hash,
};
pub use error::{CallError, CallErrorKind, LoadError, PolicyError};
pub use exports::WIT_VERSION;
pub use guest::Guest;
pub use hook::{Hook, UnknownHook};
pub use indexed::PreferredAnswer;
pub use observer::{CallEvent, CallObserver};
pub use services::{HostServices, NoHardware};
pub use types::{
    BindRequest, Candidate, CandidateKind, Capacity, CapacityRange, ClaimDevice, ContainerResponse,
    Counter, CounterConsumption, CounterSet, Device, DeviceCondition, DeviceFacts, DeviceLayout,
    DeviceNode, DeviceRef, DeviceSpec, DeviceStatus, DeviceTaint, DeviceTaintV2, Layout, Mount,
    NetworkData, NodeType, Partition, PciFunction, PreferredRequest, Quantity, RequestPolicy,
    TaintEffect, TaintEffectV2, Tainted, TaintedV2, Verdict,
};
pub use warm::InstanceStats;
