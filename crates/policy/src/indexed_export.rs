//! Where a guest's optional `preferred-allocation-indexed` export is
//! ([`IndexedExport`]): found and type-checked at load time, beside the
//! plain `preferred-allocation` it must come with; and the request record
//! its `choose` takes ([`IndexedRequest`]). Calling it is
//! [`crate::indexed`]'s job.

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, ComponentType, Instance, Lower};

use crate::call_state::CallState;
use crate::error::LoadError;
use crate::hook::Hook;
use crate::types::DeviceRef;

/// The interface name of the by-index companion of `preferred-allocation`.
pub(crate) const INTERFACE: &str = "preferred-allocation-indexed";

/// `preferred-allocation-indexed.request`.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
pub(crate) struct IndexedRequest<'a> {
    pub(crate) available: &'a [u32],
    #[component(name = "must-include")]
    pub(crate) must_include: &'a [u32],
    pub(crate) size: u32,
}

/// Where the two functions of a guest's `preferred-allocation-indexed` are.
pub(crate) struct IndexedExport {
    export: String,
    pub(crate) set_devices: ComponentExportIndex,
    pub(crate) choose: ComponentExportIndex,
}

impl IndexedExport {
    /// Finds the functions of `export`; refuses it without the plain
    /// `preferred-allocation` beside it (hosts and tools that do not know
    /// the indexed form must still be able to call the guest).
    pub(crate) fn find(
        component: &Component,
        guest: &str,
        export: String,
        has_plain: bool,
    ) -> Result<Self, LoadError> {
        let fail = |detail: String| LoadError::Signature {
            guest: guest.to_string(),
            hook: Hook::PreferredAllocation,
            export: export.clone(),
            detail,
        };
        if !has_plain {
            return Err(fail(format!(
                "`{INTERFACE}` is exported without `preferred-allocation`"
            )));
        }
        let instance = component
            .get_export_index(None, &export)
            .ok_or_else(|| fail("not an exported instance".into()))?;
        let function = |name: &str| {
            component
                .get_export_index(Some(&instance), name)
                .ok_or_else(|| fail(format!("function `{name}` is missing")))
        };
        let set_devices = function("set-devices")?;
        let choose = function("choose")?;
        Ok(Self {
            export,
            set_devices,
            choose,
        })
    }

    /// Checks both functions have their WIT signatures.
    pub(crate) fn type_check(
        &self,
        store: &mut Store<CallState>,
        instance: &Instance,
        guest: &str,
    ) -> Result<(), LoadError> {
        let fail = |e: wasmtime::Error| LoadError::Signature {
            guest: guest.to_string(),
            hook: Hook::PreferredAllocation,
            export: self.export.clone(),
            detail: format!("{e:#}"),
        };
        instance
            .get_typed_func::<(u64, &[&DeviceRef]), ()>(&mut *store, &self.set_devices)
            .map_err(fail)?;
        instance
            .get_typed_func::<(IndexedRequest<'_>,), (Result<Vec<u32>, String>,)>(
                &mut *store,
                &self.choose,
            )
            .map_err(fail)?;
        Ok(())
    }
}
