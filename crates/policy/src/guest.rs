//! A loaded guest ([`Guest`]): its hooks called under each call's limits,
//! in a fresh instance of its [`Prepared`] build or a warm one
//! ([`crate::warm`]), every call told to the engine's observer.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::{ComponentExportIndex, ComponentNamedList, Lift, Lower};

use crate::call_failure::classify;
use crate::call_state::CallInfo;
use crate::context::{CallContext, CallLimits};
use crate::error::CallError;
use crate::hook::Hook;
use crate::observer::CallEvent;
use crate::prepared::Prepared;
use crate::shared::Shared;
use crate::types::{
    BindRequest, Candidate, ClaimDevice, ContainerResponse, Device, DeviceFacts, DeviceRef,
    DeviceStatus, Layout, PreferredRequest, Tainted, TaintedV2, Verdict,
};
use crate::warm::{InstanceStats, WarmInstance, WarmPool};

/// The longest guest error message kept.
const MAX_GUEST_MESSAGE: usize = 4096;

/// A policy guest, loaded and checked: call its hooks from any thread.
///
/// Every call runs under the call's deadline and memory cap, in a fresh
/// instance of the pre-linked guest or, when the call names a device-set
/// generation ([`CallContext::generation`]), in an instance this guest kept
/// warm from an earlier call of the same generation; a trap, timeout or
/// out-of-memory fails that call only and throws its instance away. Calls are synchronous and may take
/// up to their timeout: from async code call them inside
/// `tokio::task::spawn_blocking`, or `tokio::task::block_in_place` when
/// [`Guest::may_block_in_host`] is false (never directly on a runtime
/// worker thread).
pub struct Guest {
    pub(crate) name: String,
    pub(crate) guest: Arc<str>,
    pub(crate) prepared: Arc<Prepared>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) warm: WarmPool,
}

impl fmt::Debug for Guest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guest")
            .field("name", &self.name)
            .field("content_hash", &self.prepared.hash())
            .field("hooks", &self.prepared.hooks())
            .finish()
    }
}

impl Guest {
    pub(crate) fn new(name: String, prepared: Arc<Prepared>, shared: Arc<Shared>) -> Self {
        Self {
            guest: Arc::from(name.as_str()),
            name,
            prepared,
            shared,
            warm: WarmPool::default(),
        }
    }

    /// The guest's name (the file name when loaded from a file).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Lower-case hex SHA-256 of the guest's bytes.
    pub fn content_hash(&self) -> &str {
        self.prepared.hash()
    }

    /// Bytes of the guest's compiled code and data image in memory (shared
    /// by every guest loaded from the same bytes).
    pub fn compiled_bytes(&self) -> u64 {
        self.prepared.compiled_bytes()
    }

    /// The hooks the guest exports, in WIT order.
    pub fn hooks(&self) -> &[Hook] {
        self.prepared.hooks()
    }

    /// Whether a call may block its thread inside a host import: true when
    /// the guest imports the `hardware` interface, whose attribute reads
    /// and writes touch sysfs (a hung driver can stall them). A guest
    /// without it can only compute (WASI's blocking calls trap, its
    /// filesystem, network and clocks are empty), so its calls end by their
    /// deadline: the host may run them on the calling thread.
    pub fn may_block_in_host(&self) -> bool {
        self.prepared.imports_hardware
    }

    /// How this guest's calls got their instances so far: instantiated
    /// afresh, or served warm (see [`CallContext::generation`]), and how
    /// many warm instances were retired.
    pub fn instance_stats(&self) -> InstanceStats {
        self.warm.stats()
    }

    /// Whether the guest exports `hook`.
    pub fn exports(&self, hook: Hook) -> bool {
        self.prepared.exports_of(hook).is_some()
    }

    /// `discovery.discover`: the devices to advertise.
    pub fn discover(
        &self,
        ctx: &CallContext,
        candidates: &[Candidate],
    ) -> Result<Vec<Device>, CallError> {
        self.call::<(&[Candidate],), Vec<Device>>(ctx, Hook::Discovery, (candidates,))
    }

    /// `health.check`: verdicts for (some of) the devices.
    pub fn check_health(
        &self,
        ctx: &CallContext,
        devices: &[DeviceFacts],
    ) -> Result<Vec<Verdict>, CallError> {
        self.call::<(&[DeviceFacts],), Vec<Verdict>>(ctx, Hook::Health, (devices,))
    }

    /// `preferred-allocation.choose`: the preferred device IDs (unvalidated:
    /// the host checks them before answering the kubelet).
    pub fn choose(
        &self,
        ctx: &CallContext,
        request: &PreferredRequest,
    ) -> Result<Vec<String>, CallError> {
        self.call::<(&PreferredRequest,), Vec<String>>(ctx, Hook::PreferredAllocation, (request,))
    }

    /// `allocate.allocate`: the container's response (unvalidated).
    pub fn allocate(
        &self,
        ctx: &CallContext,
        devices: &[DeviceRef],
        default: &ContainerResponse,
    ) -> Result<ContainerResponse, CallError> {
        self.call::<(&[DeviceRef], &ContainerResponse), ContainerResponse>(
            ctx,
            Hook::Allocate,
            (devices, default),
        )
    }

    /// `pre-start.pre-start`: ok, or the guest's refusal as
    /// [`CallError::GuestError`].
    pub fn pre_start(&self, ctx: &CallContext, devices: &[DeviceRef]) -> Result<(), CallError> {
        self.call::<(&[DeviceRef],), ()>(ctx, Hook::PreStart, (devices,))
    }

    /// `dra-layout.describe` (WIT 0.1.2): the DRA layout of `devices` (the
    /// answer of `discovery`): counter sets, partitions and capacity
    /// (unvalidated).
    pub fn describe_layout(
        &self,
        ctx: &CallContext,
        devices: &[Device],
    ) -> Result<Layout, CallError> {
        self.call::<(&[Device],), Layout>(ctx, Hook::DraLayout, (devices,))
    }

    /// `dra-prepare.prepare` (WIT 0.1.2): creates what a claim's devices
    /// need and answers their status (unvalidated). Set the claim on the
    /// context ([`CallContext::with_claim`]) so `claim.current` and
    /// `claim.devices` describe it. The guest's refusal is a
    /// [`CallError::GuestError`].
    pub fn dra_prepare(
        &self,
        ctx: &CallContext,
        devices: &[ClaimDevice],
    ) -> Result<Vec<DeviceStatus>, CallError> {
        self.call::<(&[ClaimDevice],), Vec<DeviceStatus>>(ctx, Hook::DraPrepare, (devices,))
    }

    /// `dra-unprepare.unprepare` (WIT 0.1.2): undoes `dra-prepare` for a
    /// claim's devices; the guest's refusal is a [`CallError::GuestError`].
    pub fn dra_unprepare(
        &self,
        ctx: &CallContext,
        devices: &[ClaimDevice],
    ) -> Result<(), CallError> {
        self.call::<(&[ClaimDevice],), ()>(ctx, Hook::DraUnprepare, (devices,))
    }

    /// `device-taints.taints` (WIT 0.1.2): taints for (some of) the devices
    /// beyond the health taint (unvalidated).
    pub fn device_taints(
        &self,
        ctx: &CallContext,
        devices: &[DeviceFacts],
    ) -> Result<Vec<Tainted>, CallError> {
        self.call::<(&[DeviceFacts],), Vec<Tainted>>(ctx, Hook::DeviceTaints, (devices,))
    }

    /// `device-taints-v2.taints` (WIT 0.1.3): taints for (some of) the
    /// devices beyond the health taint, the `none` effect and up to 16 a
    /// device allowed (unvalidated).
    pub fn device_taints_v2(
        &self,
        ctx: &CallContext,
        devices: &[DeviceFacts],
    ) -> Result<Vec<TaintedV2>, CallError> {
        self.call::<(&[DeviceFacts],), Vec<TaintedV2>>(ctx, Hook::DeviceTaintsV2, (devices,))
    }

    /// The taint hook this guest answers: `device-taints-v2` when it
    /// exports it (even beside `device-taints`, which is then never
    /// called), else `device-taints`, else `None`.
    pub fn taint_hook(&self) -> Option<Hook> {
        [Hook::DeviceTaintsV2, Hook::DeviceTaints]
            .into_iter()
            .find(|hook| self.exports(*hook))
    }

    /// The guest's taints through its [`Guest::taint_hook`], as WIT 0.1.3
    /// records (a `device-taints` answer converted; unvalidated).
    pub fn taints(
        &self,
        ctx: &CallContext,
        devices: &[DeviceFacts],
    ) -> Result<Vec<TaintedV2>, CallError> {
        match self.taint_hook() {
            Some(Hook::DeviceTaints) => Ok(self
                .device_taints(ctx, devices)?
                .into_iter()
                .map(Into::into)
                .collect()),
            _ => self.device_taints_v2(ctx, devices),
        }
    }

    /// Whether the guest serves `hook` when a resource binds it there:
    /// it exports the hook or, for `device-taints`, `device-taints-v2`.
    pub fn serves(&self, hook: Hook) -> bool {
        self.exports(hook) || (hook == Hook::DeviceTaints && self.exports(Hook::DeviceTaintsV2))
    }

    /// `passthrough.may-bind` (WIT 0.1.3): ok to bind the request's
    /// functions to its driver, or the guest's refusal as
    /// [`CallError::GuestError`] (its message the reason).
    pub fn may_bind(&self, ctx: &CallContext, request: &BindRequest) -> Result<(), CallError> {
        self.call::<(&BindRequest,), ()>(ctx, Hook::Passthrough, (request,))
    }

    /// Calls every exported hook once with empty input (`discover([])`,
    /// `check([])`, `choose` of nothing with size 0, `allocate([], default)`,
    /// `pre-start([])`, `describe([])`, `prepare([])`, `unprepare([])`,
    /// `taints([])`, `may-bind` of an empty request) under `ctx`'s limits:
    /// run it on a freshly loaded guest before putting it in service. The
    /// first failure is returned; `may-bind` refusing the empty request
    /// (a guest's `Err`) is no failure, since refusing is its job.
    pub fn smoke_test(&self, ctx: &CallContext) -> Result<(), CallError> {
        for hook in self.hooks() {
            match hook {
                Hook::Discovery => self.discover(ctx, &[]).map(drop)?,
                Hook::Health => self.check_health(ctx, &[]).map(drop)?,
                Hook::PreferredAllocation => {
                    self.choose(ctx, &PreferredRequest::default()).map(drop)?
                }
                Hook::Allocate => self
                    .allocate(ctx, &[], &ContainerResponse::default())
                    .map(drop)?,
                Hook::PreStart => self.pre_start(ctx, &[])?,
                Hook::DraLayout => self.describe_layout(ctx, &[]).map(drop)?,
                Hook::DraPrepare => self.dra_prepare(ctx, &[]).map(drop)?,
                Hook::DraUnprepare => self.dra_unprepare(ctx, &[])?,
                Hook::DeviceTaints => self.device_taints(ctx, &[]).map(drop)?,
                Hook::DeviceTaintsV2 => self.device_taints_v2(ctx, &[]).map(drop)?,
                Hook::Passthrough => match self.may_bind(ctx, &BindRequest::default()) {
                    Ok(()) | Err(CallError::GuestError { .. }) => {}
                    Err(error) => return Err(error),
                },
            }
        }
        Ok(())
    }

    fn call<P, T>(&self, ctx: &CallContext, hook: Hook, params: P) -> Result<T, CallError>
    where
        P: ComponentNamedList + Lower,
        T: Lift + 'static,
        (Result<T, String>,): ComponentNamedList + Lift,
    {
        self.observed(ctx, hook, || self.call_inner::<P, T>(ctx, hook, params))
    }

    /// Runs `call` and tells the engine's observer how it went.
    pub(crate) fn observed<T>(
        &self,
        ctx: &CallContext,
        hook: Hook,
        call: impl FnOnce() -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let started = Instant::now();
        // The epoch advances (deadlines run) only while a guest runs.
        let ticking = self.shared.busy();
        let result = call();
        drop(ticking);
        if let Some(observer) = &self.shared.observer {
            observer.call_finished(&CallEvent {
                guest: &self.name,
                hook,
                resource: &ctx.resource,
                duration: started.elapsed(),
                error: result.as_ref().err().map(CallError::kind),
            });
        }
        result
    }

    fn call_inner<P, T>(&self, ctx: &CallContext, hook: Hook, params: P) -> Result<T, CallError>
    where
        P: ComponentNamedList + Lower,
        T: Lift + 'static,
        (Result<T, String>,): ComponentNamedList + Lift,
    {
        let Some(func) = self.prepared.exports_of(hook) else {
            return Err(CallError::NotExported {
                guest: self.name.clone(),
                hook,
            });
        };
        let limits = self.limits(ctx);
        let mut instance = self.acquire(ctx, hook, limits)?;
        let result = self.call_export::<P, T>(&mut instance, hook, limits, func, params);
        self.warm.release(instance, &result);
        result
    }

    /// The call's limits, the memory cap clamped to the engine's.
    pub(crate) fn limits(&self, ctx: &CallContext) -> CallLimits {
        CallLimits {
            timeout: ctx.limits.timeout,
            memory_bytes: ctx.limits.memory_bytes.min(self.shared.max_memory_bytes),
        }
    }

    /// A warm instance of the call's generation readied for this call, or
    /// a fresh one.
    pub(crate) fn acquire(
        &self,
        ctx: &CallContext,
        hook: Hook,
        limits: CallLimits,
    ) -> Result<WarmInstance, CallError> {
        let info = || CallInfo {
            guest: Arc::clone(&self.guest),
            hook: Some(hook),
            resource: ctx.resource.clone(),
            services: Arc::clone(&ctx.services),
            config: Arc::clone(&ctx.config),
            claim: ctx.claim.clone(),
        };
        let generation = ctx.generation.filter(|_| self.shared.warm_instances);
        if let Some(generation) = generation
            && let Some(mut warm) = self.warm.take(generation, limits.memory_bytes)
        {
            warm.store.data_mut().rearm(info(), limits.memory_bytes);
            warm.store
                .set_epoch_deadline(self.shared.deadline_ticks(limits.timeout));
            return Ok(warm);
        }
        self.warm.count_instantiated();
        let mut store = self.shared.new_store(info(), limits);
        let instance = match self.prepared.pre.instantiate(&mut store) {
            Ok(instance) => instance,
            Err(error) => return Err(classify(&self.name, hook, limits, &store, error, true)),
        };
        Ok(WarmInstance {
            store,
            instance,
            generation,
            table_generation: None,
            calls: 0,
            baseline_bytes: None,
        })
    }

    /// Calls one export function of `instance`: `Ok` with the guest's
    /// answer, its `Err` as [`CallError::GuestError`], a wasmtime failure
    /// classified.
    pub(crate) fn call_export<P, T>(
        &self,
        instance: &mut WarmInstance,
        hook: Hook,
        limits: CallLimits,
        func: &ComponentExportIndex,
        params: P,
    ) -> Result<T, CallError>
    where
        P: ComponentNamedList + Lower,
        T: Lift + 'static,
        (Result<T, String>,): ComponentNamedList + Lift,
    {
        let store = &mut instance.store;
        let func = instance
            .instance
            .get_typed_func::<P, (Result<T, String>,)>(&mut *store, func)
            .map_err(|e| CallError::Instantiate {
                guest: self.name.clone(),
                hook,
                detail: format!("{e:#}"),
            })?;
        match func.call(&mut *store, params) {
            Ok((Ok(value),)) => Ok(value),
            Ok((Err(message),)) => Err(self.guest_error(hook, message)),
            Err(error) => Err(classify(&self.name, hook, limits, store, error, false)),
        }
    }

    /// The guest's own `Err`, its message bounded.
    fn guest_error(&self, hook: Hook, mut message: String) -> CallError {
        if message.len() > MAX_GUEST_MESSAGE {
            let mut end = MAX_GUEST_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str("...");
        }
        CallError::GuestError {
            guest: self.name.clone(),
            hook,
            message,
        }
    }
}
