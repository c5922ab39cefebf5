//! A guest's bytes made ready to run ([`Prepared`], shared by every guest
//! loaded from the same bytes): compiled (or mapped from the precompiled
//! directory), its exports checked against the hooks ([`crate::exports`])
//! and its imports against what the host provides, pre-linked, and every
//! exported hook type-checked in a throwaway instance.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre};

use crate::call_failure::classify;
use crate::call_state::{CallInfo, CallState};
use crate::error::LoadError;
use crate::exports::{Exported, TOOLCHAIN_EXPORTS, classify_export};
use crate::hook::Hook;
use crate::indexed_export::IndexedExport;
use crate::services::NoHardware;
use crate::shared::Shared;
use crate::types::{
    BindRequest, Candidate, ClaimDevice, ContainerResponse, Device, DeviceFacts, DeviceRef,
    DeviceStatus, Layout, PreferredRequest, Tainted, TaintedV2, Verdict,
};

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
    exports: [Option<HookExport>; Hook::COUNT],
    /// `preferred-allocation-indexed`, when exported.
    pub(crate) indexed: Option<IndexedExport>,
    /// Whether it imports the `hardware` interface (see
    /// [`Guest::may_block_in_host`](crate::Guest::may_block_in_host)).
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

        let ExportNames {
            hooks: names,
            indexed: indexed_name,
        } = ExportNames::of(shared, &component, name)?;

        // Imports: the linker names what it cannot satisfy.
        let pre = shared
            .linker
            .instantiate_pre(&component)
            .map_err(|e| import_error(name, &e))?;

        let (exports, hooks) = hook_exports(&component, name, names)?;
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
        let prepared = Self {
            hash: hash.to_string(),
            compiled_bytes: compiled_size(&component),
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

    /// The hooks the guest exports, in WIT order.
    pub(crate) fn hooks(&self) -> &[Hook] {
        &self.hooks
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
        let mut store = shared.new_store(info, limits);
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

/// The export names of a guest's hooks, and of
/// `preferred-allocation-indexed` when it has one.
struct ExportNames {
    /// By [`Hook::index`].
    hooks: [Option<String>; Hook::COUNT],
    indexed: Option<String>,
}

impl ExportNames {
    /// The exports of `component` (guest `name`): only hooks of a
    /// compatible version, each once, at least one; a toolchain's own
    /// exports are ignored.
    fn of(shared: &Shared, component: &Component, name: &str) -> Result<Self, LoadError> {
        let mut names: [Option<String>; Hook::COUNT] = Default::default();
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
        Ok(Self {
            hooks: names,
            indexed: indexed_name,
        })
    }
}

/// Finds the function of each hook `component` (guest `name`) exports
/// under `names`: the exports by hook, and the hooks exported in WIT
/// order.
fn hook_exports(
    component: &Component,
    name: &str,
    mut names: [Option<String>; Hook::COUNT],
) -> Result<([Option<HookExport>; Hook::COUNT], Vec<Hook>), LoadError> {
    let mut exports: [Option<HookExport>; Hook::COUNT] = Default::default();
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
    Ok((exports, hooks))
}

/// Size of `component`'s compiled code and data image in memory.
fn compiled_size(component: &Component) -> u64 {
    let image = component.image_range();
    u64::try_from(image.end.addr().saturating_sub(image.start.addr())).unwrap_or(u64::MAX)
}

/// Whether a component import names the `hardware` interface, whatever
/// its version.
fn is_hardware_import(import: &str) -> bool {
    import
        .split('@')
        .next()
        .is_some_and(|name| name == "wasm-device-plugin:policy/hardware")
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
        Hook::DraLayout => instance
            .get_typed_func::<(&[Device],), (Result<Layout, String>,)>(store, func)
            .map(drop),
        Hook::DraPrepare => instance
            .get_typed_func::<(&[ClaimDevice],), (Result<Vec<DeviceStatus>, String>,)>(store, func)
            .map(drop),
        Hook::DraUnprepare => instance
            .get_typed_func::<(&[ClaimDevice],), (Result<(), String>,)>(store, func)
            .map(drop),
        Hook::DeviceTaints => instance
            .get_typed_func::<(&[DeviceFacts],), (Result<Vec<Tainted>, String>,)>(store, func)
            .map(drop),
        Hook::DeviceTaintsV2 => instance
            .get_typed_func::<(&[DeviceFacts],), (Result<Vec<TaintedV2>, String>,)>(store, func)
            .map(drop),
        Hook::Passthrough => instance
            .get_typed_func::<(&BindRequest,), (Result<(), String>,)>(store, func)
            .map(drop),
    }
}
