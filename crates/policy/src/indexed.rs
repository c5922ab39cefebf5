//! `preferred-allocation` by index: the optional
//! `preferred-allocation-indexed` export. A guest that has it receives the
//! resource's device table once per device-set generation (`set-devices`)
//! and is then asked with indexes into it (`choose`), so a call lowers a
//! few integers instead of every device's strings. For a guest without it,
//! [`Guest::choose_by_index`] sends the usual `preferred-allocation`
//! request, lowered straight from the borrowed table (no copy on the host).

use wasmtime::Store;
use wasmtime::component::{Component, ComponentExportIndex, ComponentType, Instance, Lower};

use crate::error::{CallError, LoadError};
use crate::guest::Guest;
use crate::host::CallState;
use crate::types::DeviceRef;
use crate::{CallContext, Hook};

/// The interface name of the by-index companion of `preferred-allocation`.
pub(crate) const INTERFACE: &str = "preferred-allocation-indexed";

/// What [`Guest::choose_by_index`] got back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PreferredAnswer {
    /// Indexes into the table given (from a guest exporting
    /// `preferred-allocation-indexed`); unchecked: an index may be out of
    /// range.
    Indexes(Vec<u32>),
    /// Device IDs (from a guest with `preferred-allocation` only);
    /// unchecked.
    Ids(Vec<String>),
}

impl PreferredAnswer {
    /// The answer as device IDs of `table`, or a sentence naming the first
    /// index outside it.
    pub fn into_ids(self, table: &[&DeviceRef]) -> Result<Vec<String>, String> {
        match self {
            PreferredAnswer::Ids(ids) => Ok(ids),
            PreferredAnswer::Indexes(indexes) => indexes
                .into_iter()
                .map(|index| {
                    usize::try_from(index)
                        .ok()
                        .and_then(|i| table.get(i))
                        .map(|device| device.id.clone())
                        .ok_or_else(|| {
                            format!(
                                "index {index} is outside the table of {} devices",
                                table.len()
                            )
                        })
                })
                .collect(),
        }
    }
}

impl PreferredAnswer {
    /// The answer as positions in a table of `table_len` devices:
    /// indexes as they are, IDs through `position_of` (the table's lookup
    /// by ID). A sentence names the first index outside the table or the
    /// first ID not in it. Duplicates and availability are the caller's
    /// to check.
    pub fn into_positions(
        self,
        table_len: usize,
        position_of: impl Fn(&str) -> Option<u32>,
    ) -> Result<Vec<u32>, String> {
        match self {
            PreferredAnswer::Indexes(indexes) => {
                match indexes.iter().find(|&&i| i as usize >= table_len) {
                    Some(index) => Err(format!(
                        "index {index} is outside the table of {table_len} devices"
                    )),
                    None => Ok(indexes),
                }
            }
            PreferredAnswer::Ids(ids) => ids
                .iter()
                .map(|id| {
                    position_of(id)
                        .ok_or_else(|| format!("answered {id:?}, which is not available"))
                })
                .collect(),
        }
    }
}

/// `preferred-allocation-indexed.request`.
#[derive(ComponentType, Lower, Clone, Copy, Debug)]
#[component(record)]
struct IndexedRequest<'a> {
    available: &'a [u32],
    #[component(name = "must-include")]
    must_include: &'a [u32],
    size: u32,
}

/// `preferred-allocation.request`, borrowing the host's devices.
#[derive(ComponentType, Lower, Clone, Debug)]
#[component(record)]
struct BorrowedRequest<'a> {
    available: Vec<&'a DeviceRef>,
    #[component(name = "must-include")]
    must_include: Vec<&'a str>,
    size: u32,
}

/// Where the two functions of a guest's `preferred-allocation-indexed` are.
pub(crate) struct IndexedExport {
    export: String,
    set_devices: ComponentExportIndex,
    choose: ComponentExportIndex,
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

impl Guest {
    /// Whether the guest exports `preferred-allocation-indexed`.
    pub fn chooses_by_index(&self) -> bool {
        self.prepared.indexed.is_some()
    }

    /// `preferred-allocation` over a device table: `table` is every device
    /// of the resource (the same table for every call of one
    /// [`CallContext::generation`]), `available` and `must_include` are
    /// indexes into it.
    ///
    /// A guest exporting `preferred-allocation-indexed` gets the table once
    /// per generation and warm instance (`set-devices`), then only the
    /// indexes, and answers indexes ([`PreferredAnswer::Indexes`]). Any
    /// other guest gets the usual request lowered from the borrowed table
    /// and answers IDs ([`PreferredAnswer::Ids`]). The answer is
    /// unchecked. An index of `available` or `must_include` outside the
    /// table is a bug of the caller and panics.
    pub fn choose_by_index(
        &self,
        ctx: &CallContext,
        table: &[&DeviceRef],
        available: &[u32],
        must_include: &[u32],
        size: u32,
    ) -> Result<PreferredAnswer, CallError> {
        let hook = Hook::PreferredAllocation;
        self.observed(ctx, hook, || {
            let Some(plain) = self.prepared.exports_of(hook) else {
                return Err(CallError::NotExported {
                    guest: self.name.clone(),
                    hook,
                });
            };
            let limits = self.limits(ctx);
            let mut instance = self.acquire(ctx, hook, limits)?;
            let result = match (&self.prepared.indexed, ctx.generation) {
                (Some(indexed), Some(generation)) => {
                    let mut loaded = Ok(());
                    if instance.table_generation != Some(generation) {
                        instance.table_generation = None;
                        loaded =
                            self.set_devices(&mut instance, indexed, limits, generation, table);
                        if loaded.is_ok() {
                            instance.table_generation = Some(generation);
                        }
                    }
                    loaded.and_then(|()| {
                        let request = IndexedRequest {
                            available,
                            must_include,
                            size,
                        };
                        self.call_export::<_, Vec<u32>>(
                            &mut instance,
                            hook,
                            limits,
                            &indexed.choose,
                            (request,),
                        )
                        .map(PreferredAnswer::Indexes)
                    })
                }
                _ => {
                    let pick = |i: &u32| table[*i as usize];
                    let request = BorrowedRequest {
                        available: available.iter().map(pick).collect(),
                        must_include: must_include.iter().map(|i| pick(i).id.as_str()).collect(),
                        size,
                    };
                    self.call_export::<_, Vec<String>>(
                        &mut instance,
                        hook,
                        limits,
                        plain,
                        (&request,),
                    )
                    .map(PreferredAnswer::Ids)
                }
            };
            self.release(instance, &result);
            result
        })
    }

    /// `set-devices(generation, table)` on `instance`.
    fn set_devices(
        &self,
        instance: &mut crate::warm::WarmInstance,
        indexed: &IndexedExport,
        limits: crate::CallLimits,
        generation: u64,
        table: &[&DeviceRef],
    ) -> Result<(), CallError> {
        let hook = Hook::PreferredAllocation;
        let store = &mut instance.store;
        let func = instance
            .instance
            .get_typed_func::<(u64, &[&DeviceRef]), ()>(&mut *store, &indexed.set_devices)
            .map_err(|e| CallError::Instantiate {
                guest: self.name.clone(),
                hook,
                detail: format!("{e:#}"),
            })?;
        func.call(&mut *store, (generation, table))
            .map_err(|error| {
                crate::call_failure::classify(&self.name, hook, limits, store, error, false)
            })
    }
}
