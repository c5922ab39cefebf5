//! `preferred-allocation` by index: the optional
//! `preferred-allocation-indexed` export. A guest that has it receives the
//! resource's device table once per device-set generation (`set-devices`)
//! and is then asked with indexes into it (`choose`), so a call lowers a
//! few integers instead of every device's strings. For a guest without it,
//! [`Guest::choose_by_index`] sends the usual `preferred-allocation`
//! request, lowered straight from the borrowed table (no copy on the host).
//! Finding and type-checking the export at load time is
//! [`crate::indexed_export`]'s job.

use wasmtime::component::{ComponentType, Lower};

use crate::call_failure::classify;
use crate::context::{CallContext, CallLimits};
use crate::error::CallError;
use crate::guest::Guest;
use crate::hook::Hook;
use crate::indexed_export::{IndexedExport, IndexedRequest};
use crate::types::DeviceRef;
use crate::warm::WarmInstance;

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

/// `preferred-allocation.request`, borrowing the host's devices.
#[derive(ComponentType, Lower, Clone, Debug)]
#[component(record)]
struct BorrowedRequest<'a> {
    available: Vec<&'a DeviceRef>,
    #[component(name = "must-include")]
    must_include: Vec<&'a str>,
    size: u32,
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
            self.warm.release(instance, &result);
            result
        })
    }

    /// `set-devices(generation, table)` on `instance`.
    fn set_devices(
        &self,
        instance: &mut WarmInstance,
        indexed: &IndexedExport,
        limits: CallLimits,
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
            .map_err(|error| classify(&self.name, hook, limits, store, error, false))
    }
}
