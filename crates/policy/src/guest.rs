//! A loaded guest: compiled, checked and pre-linked; calls run it under
//! the call's limits in a fresh or a warm instance ([`crate::warm`]).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::{
    ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, Lower,
};

use crate::call_failure::classify;
use crate::engine::Shared;
use crate::error::{CallError, LoadError};
use crate::host::{CallInfo, CallState};
use crate::indexed::{self, IndexedExport};
use crate::types::{
    Candidate, ContainerResponse, Device, DeviceFacts, DeviceRef, PreferredRequest, Verdict,
};
use crate::warm::WarmPool;
use crate::{CallContext, CallEvent, CallLimits, Hook, NoHardware};

/// The WIT package every hook belongs to.
const PACKAGE: &str = "wasm-device-plugin:policy";
/// The package version this host implements.
const HOST_VERSION: &str = "0.1.1";
/// The guest versions it accepts.
const HOST_RANGE: &str = "0.1.x";
/// The longest guest error message kept.
pub(crate) const MAX_GUEST_MESSAGE: usize = 4096;

/// One exported hook: where its function is and under which export name.
#[derive(Clone)]
struct HookExport {
    export: String,
    func: ComponentExportIndex,
}

/// What is shared by every guest loaded from the same bytes.
pub(crate) struct Prepared {
    hash: String,
    /// Size of the compiled code and data image in memory.
    compiled_bytes: u64,
    pub(crate) pre: InstancePre<CallState>,
    hooks: Vec<Hook>,
    exports: [Option<HookExport>; 5],
    /// `preferred-allocation-indexed`, when exported.
    pub(crate) indexed: Option<IndexedExport>,
    /// Whether it imports the `hardware` interface (see
    /// [`Guest::may_block_in_host`]).
    pub(crate) imports_hardware: bool,
}

impl Prepared {
    pub(crate) fn new(
        shared: &Shared,
        name: &str,
        hash: &str,
        bytes: &[u8],
    ) -> Result<Self, LoadError> {
        let started = Instant::now();
        let component = shared.compile(name, hash, bytes)?;
        tracing::debug!(
            guest = name,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "load: compiled or mapped"
        );

        // Exports: only hooks of a compatible version, each once, at least one.
        let mut names: [Option<String>; 5] = Default::default();
        let mut indexed_name = None;
        for (export, _) in component.component_type().exports(&shared.engine) {
            if TOOLCHAIN_EXPORTS.contains(&export) {
                tracing::debug!(guest = name, export, "ignoring a toolchain's own export");
                continue;
            }
            let hook = match classify_export(name, export)? {
                Exported::Hook(hook) => hook,
                Exported::Indexed => {
                    indexed_name = Some(export.to_string());
                    continue;
                }
            };
            if let Some(first) = &names[hook.index()] {
                return Err(LoadError::DuplicateHook {
                    guest: name.to_string(),
                    hook,
                    first: first.clone(),
                    second: export.to_string(),
                });
            }
            names[hook.index()] = Some(export.to_string());
        }
        if names.iter().all(Option::is_none) {
            return Err(LoadError::NoHook {
                guest: name.to_string(),
            });
        }

        // Imports: the linker names what it cannot satisfy.
        let pre = shared
            .linker
            .instantiate_pre(&component)
            .map_err(|e| import_error(name, &e))?;

        let mut exports: [Option<HookExport>; 5] = Default::default();
        let mut hooks = Vec::new();
        for hook in Hook::ALL {
            let Some(export) = names[hook.index()].take() else {
                continue;
            };
            let signature = |detail: String| LoadError::Signature {
                guest: name.to_string(),
                hook,
                export: export.clone(),
                detail,
            };
            let instance = component
                .get_export_index(None, export.as_str())
                .ok_or_else(|| signature("not an exported instance".into()))?;
            let func = component
                .get_export_index(Some(&instance), hook.function())
                .ok_or_else(|| signature(format!("function `{}` is missing", hook.function())))?;
            exports[hook.index()] = Some(HookExport { export, func });
            hooks.push(hook);
        }
        let indexed = match indexed_name {
            Some(export) => Some(IndexedExport::find(
                &component,
                name,
                export,
                exports[Hook::PreferredAllocation.index()].is_some(),
            )?),
            None => None,
        };

        let imports_hardware = component
            .component_type()
            .imports(&shared.engine)
            .any(|(import, _)| is_hardware_import(import));
        let image = component.image_range();
        let compiled_bytes =
            u64::try_from(image.end.addr().saturating_sub(image.start.addr())).unwrap_or(u64::MAX);
        let prepared = Self {
            hash: hash.to_string(),
            compiled_bytes,
            pre,
            hooks,
            exports,
            indexed,
            imports_hardware,
        };
        prepared.type_check(shared, name)?;
        tracing::debug!(
            guest = name,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "load: pre-linked and type-checked"
        );
        Ok(prepared)
    }

    /// The function of an exported hook.
    pub(crate) fn exports_of(&self, hook: Hook) -> Option<&ComponentExportIndex> {
        self.exports[hook.index()].as_ref().map(|e| &e.func)
    }

    /// Lower-case hex SHA-256 of the guest's bytes.
    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }

    /// How many bytes the compiled image occupies in memory.
    pub(crate) fn compiled_bytes(&self) -> u64 {
        self.compiled_bytes
    }

    /// Instantiates once under the load limits and checks that every
    /// exported hook function has the WIT signature.
    fn type_check(&self, shared: &Shared, name: &str) -> Result<(), LoadError> {
        let guest: Arc<str> = Arc::from(name);
        let limits = shared.load_limits;
        let info = CallInfo {
            guest: Arc::clone(&guest),
            hook: None,
            resource: String::new(),
            services: Arc::new(NoHardware),
            config: Arc::new(Vec::new()),
            claim: None,
        };
        // Instantiation may run the guest's start code under a deadline.
        let _ticking = shared.busy();
        let mut store = new_store(shared, info, limits);
        let instance = self
            .pre
            .instantiate(&mut store)
            .map_err(|error| LoadError::Check {
                guest: name.to_string(),
                source: classify(&guest, self.hooks[0], limits, &store, error, true),
            })?;
        for hook in &self.hooks {
            let Some(export) = &self.exports[hook.index()] else {
                continue;
            };
            typecheck(*hook, &mut store, &instance, &export.func).map_err(|e| {
                LoadError::Signature {
                    guest: name.to_string(),
                    hook: *hook,
                    export: export.export.clone(),
                    detail: format!("{e:#}"),
                }
            })?;
        }
        if let Some(indexed) = &self.indexed {
            indexed.type_check(&mut store, &instance, name)?;
        }
        Ok(())
    }
}

/// What an export of the package is.
enum Exported {
    /// One of the five hooks.
    Hook(Hook),
    /// `preferred-allocation-indexed`, the by-index companion of
    /// `preferred-allocation`.
    Indexed,
}

/// Maps an export name to its hook, refusing anything else.
/// Exports language toolchains add on their own, which are never called:
/// componentize-py leaves its build-time init entry `exports`.
const TOOLCHAIN_EXPORTS: &[&str] = &["exports"];

/// Whether a component import names the `hardware` interface, whatever
/// its version.
fn is_hardware_import(import: &str) -> bool {
    import
        .split('@')
        .next()
        .is_some_and(|name| name == "wasm-device-plugin:policy/hardware")
}

fn classify_export(guest: &str, export: &str) -> Result<Exported, LoadError> {
    let unknown = || LoadError::UnknownExport {
        guest: guest.to_string(),
        export: export.to_string(),
    };
    let (path, version) = match export.split_once('@') {
        Some((path, version)) => (path, Some(version)),
        None => (export, None),
    };
    let Some((package, interface)) = path.split_once('/') else {
        return Err(unknown());
    };
    if package != PACKAGE {
        return Err(unknown());
    }
    let exported = if interface == indexed::INTERFACE {
        Exported::Indexed
    } else {
        Exported::Hook(interface.parse().map_err(|_| unknown())?)
    };
    let incompatible = |found: &str| LoadError::IncompatibleVersion {
        guest: guest.to_string(),
        export: export.to_string(),
        found: found.to_string(),
        host: HOST_VERSION,
        host_range: HOST_RANGE,
    };
    let Some(version) = version else {
        return Err(incompatible("none"));
    };
    let parsed = semver::Version::parse(version).map_err(|_| incompatible(version))?;
    if parsed.major != 0 || parsed.minor != 1 || !parsed.pre.is_empty() {
        return Err(incompatible(version));
    }
    Ok(exported)
}

/// Turns the linker's refusal into an error naming the import.
fn import_error(guest: &str, error: &wasmtime::Error) -> LoadError {
    let detail = format!("{error:#}");
    // The linker's message reads "component imports instance `a`, but ...:
    // instance export `b` ...": keep the backticked names.
    let mut names = Vec::new();
    let mut rest = detail.as_str();
    while let Some(start) = rest.find('`') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('`') else { break };
        names.push(&after[..end]);
        rest = &after[end + 1..];
    }
    let import = match names.as_slice() {
        [] => "?".to_string(),
        [only] => (*only).to_string(),
        [instance, item, ..] => format!("{instance}#{item}"),
    };
    LoadError::UnknownImport {
        guest: guest.to_string(),
        import,
        detail,
    }
}

fn typecheck(
    hook: Hook,
    store: &mut Store<CallState>,
    instance: &Instance,
    func: &ComponentExportIndex,
) -> wasmtime::Result<()> {
    match hook {
        Hook::Discovery => instance
            .get_typed_func::<(&[Candidate],), (Result<Vec<Device>, String>,)>(store, func)
            .map(drop),
        Hook::Health => instance
            .get_typed_func::<(&[DeviceFacts],), (Result<Vec<Verdict>, String>,)>(store, func)
            .map(drop),
        Hook::PreferredAllocation => instance
            .get_typed_func::<(&PreferredRequest,), (Result<Vec<String>, String>,)>(store, func)
            .map(drop),
        Hook::Allocate => instance
            .get_typed_func::<(&[DeviceRef], &ContainerResponse), (Result<ContainerResponse, String>,)>(
                store, func,
            )
            .map(drop),
        Hook::PreStart => instance
            .get_typed_func::<(&[DeviceRef],), (Result<(), String>,)>(store, func)
            .map(drop),
    }
}

pub(crate) fn new_store(shared: &Shared, info: CallInfo, limits: CallLimits) -> Store<CallState> {
    let memory = limits.memory_bytes.min(shared.max_memory_bytes);
    let mut store = Store::new(&shared.engine, CallState::new(info, memory));
    store.limiter(|state| &mut state.limiter);
    store.set_epoch_deadline(shared.deadline_ticks(limits.timeout));
    store.epoch_deadline_trap();
    store
}

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
            .field("content_hash", &self.prepared.hash)
            .field("hooks", &self.prepared.hooks)
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
        &self.prepared.hash
    }

    /// Bytes of the guest's compiled code and data image in memory (shared
    /// by every guest loaded from the same bytes).
    pub fn compiled_bytes(&self) -> u64 {
        self.prepared.compiled_bytes()
    }

    /// The hooks the guest exports, in WIT order.
    pub fn hooks(&self) -> &[Hook] {
        &self.prepared.hooks
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

    /// Whether the guest exports `hook`.
    pub fn exports(&self, hook: Hook) -> bool {
        self.prepared.exports[hook.index()].is_some()
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

    /// Calls every exported hook once with empty input (`discover([])`,
    /// `check([])`, `choose` of nothing with size 0, `allocate([], default)`,
    /// `pre-start([])`) under `ctx`'s limits: run it on a freshly loaded
    /// guest before putting it in service. The first failure is returned.
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
        let Some(export) = &self.prepared.exports[hook.index()] else {
            return Err(CallError::NotExported {
                guest: self.name.clone(),
                hook,
            });
        };
        let limits = self.limits(ctx);
        let mut instance = self.acquire(ctx, hook, limits)?;
        let result = self.call_export::<P, T>(&mut instance, hook, limits, &export.func, params);
        self.release(instance, &result);
        result
    }
}
