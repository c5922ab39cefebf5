//! `preferred-allocation` by index: a guest implements
//! [`PreferredAllocationByIndex`] and exports it with
//! [`export_preferred_allocation_by_index!`](crate::export_preferred_allocation_by_index),
//! which exports both `preferred-allocation-indexed` (the fast path: the
//! host sends the device table once per device-set generation, then only
//! positions in it) and the plain `preferred-allocation` (for hosts that
//! predate the indexed form; the SDK builds a table from the request and
//! maps positions back to IDs).
//!
//! ```ignore
//! use wdp_guest_sdk::{DeviceRef, PreferredAllocationByIndex};
//!
//! struct FirstFit;
//!
//! impl PreferredAllocationByIndex for FirstFit {
//!     type Table = Vec<DeviceRef>;
//!     fn load(devices: Vec<DeviceRef>) -> Self::Table {
//!         devices
//!     }
//!     fn choose(_: &Self::Table, available: &[u32], must: &[u32], size: u32) -> Result<Vec<u32>, String> {
//!         let mut chosen = must.to_vec();
//!         chosen.extend(available.iter().filter(|p| !must.contains(p)));
//!         chosen.truncate(size as usize);
//!         Ok(chosen)
//!     }
//! }
//!
//! wdp_guest_sdk::export_preferred_allocation_by_index!(FirstFit);
//! ```

use crate::DeviceRef;

/// A preferred-allocation policy over a device table.
pub trait PreferredAllocationByIndex {
    /// What the policy derives from the device table: build indexes,
    /// intern keys, keep what it needs. Made once per device-set
    /// generation and kept between the calls of that generation.
    type Table: 'static;

    /// Prepares the table of every device of the resource, in the host's
    /// order; positions in later calls index this list.
    fn load(devices: Vec<DeviceRef>) -> Self::Table;

    /// Returns exactly `size` distinct positions from `available`,
    /// including every position of `must_include`. A request that cannot
    /// be met should fail in the contract's order, with its messages (see
    /// [`unanswerable`]): too few distinct available devices first, then a
    /// must-include position that is not available, then too many
    /// must-include devices; the plain form answers the same way for an
    /// unknown must-include ID.
    fn choose(
        table: &Self::Table,
        available: &[u32],
        must_include: &[u32],
        size: u32,
    ) -> Result<Vec<u32>, String>;
}

/// The plain `preferred-allocation.choose` on top of a by-index policy:
/// the request's devices become a table, must-include IDs positions, and
/// the answer's positions IDs again.
///
/// A must-include ID that is not among `available` has no position, so
/// the policy never sees it: this function answers the error itself, in
/// the order of the contract (see [`unanswerable`]): when the request is
/// also short of devices, `only N devices available for an allocation of
/// S`, else `must-include device "ID" is not available`. Every other
/// request reaches [`PreferredAllocationByIndex::choose`] unchanged.
pub fn choose_by_ids<P: PreferredAllocationByIndex>(
    available: Vec<DeviceRef>,
    must_include: Vec<String>,
    size: u32,
) -> Result<Vec<String>, String> {
    let ids: Vec<String> = available.iter().map(|d| d.id.clone()).collect();
    let must = must_include
        .iter()
        .map(|id| {
            ids.iter()
                .position(|known| known == id)
                .map(|p| p as u32)
                .ok_or_else(|| unanswerable(&ids, id, size))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    let positions: Vec<u32> = (0..ids.len() as u32).collect();
    let table = P::load(available);
    P::choose(&table, &positions, &must, size)?
        .into_iter()
        .map(|p| {
            ids.get(p as usize)
                .cloned()
                .ok_or_else(|| format!("position {p} is outside the request"))
        })
        .collect()
}

/// The error for a request naming a must-include ID that is not among
/// the `available` IDs, by the contract's order of
/// `preferred-allocation` errors (the `packing-core` crate, the polyglot
/// examples and this helper all follow it):
///
/// 1. fewer distinct available IDs than `size`: `only N devices available
///    for an allocation of S` (the request cannot be met whatever it
///    must include);
/// 2. a must-include ID that is not available, the first in request
///    order: `must-include device "ID" is not available` (the ID as Rust's
///    `{:?}` writes it);
/// 3. more distinct must-include IDs than `size`: `N must-include devices
///    do not fit an allocation of S`.
pub fn unanswerable(available_ids: &[String], must_include: &str, size: u32) -> String {
    let mut distinct: Vec<&str> = available_ids.iter().map(String::as_str).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < size as usize {
        format!(
            "only {} devices available for an allocation of {size}",
            distinct.len()
        )
    } else {
        format!("must-include device {must_include:?} is not available")
    }
}

/// Exports a type implementing [`PreferredAllocationByIndex`] as the
/// guest's `preferred-allocation-indexed` and `preferred-allocation`
/// hooks. The table lives in the instance between calls; the host replaces
/// it (`set-devices`) whenever the device set changes.
#[macro_export]
macro_rules! export_preferred_allocation_by_index {
    ($ty:ty) => {
        const _: () = {
            use $crate::preferred_allocation_indexed_world::exports::wasm_device_plugin::policy::preferred_allocation_indexed as __wdp_indexed;

            struct __WdpByIndex;

            ::std::thread_local! {
                static __WDP_TABLE: ::core::cell::RefCell<
                    ::core::option::Option<<$ty as $crate::PreferredAllocationByIndex>::Table>,
                > = const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }

            impl __wdp_indexed::Guest for __WdpByIndex {
                fn set_devices(_generation: u64, devices: ::std::vec::Vec<$crate::DeviceRef>) {
                    // Drop the old table first: only one is ever held.
                    __WDP_TABLE.with(|table| table.borrow_mut().take());
                    let loaded = <$ty as $crate::PreferredAllocationByIndex>::load(devices);
                    __WDP_TABLE.with(|table| *table.borrow_mut() = ::core::option::Option::Some(loaded));
                }

                fn choose(
                    request: __wdp_indexed::Request,
                ) -> ::core::result::Result<::std::vec::Vec<u32>, ::std::string::String> {
                    __WDP_TABLE.with(|table| match &*table.borrow() {
                        ::core::option::Option::Some(table) => {
                            <$ty as $crate::PreferredAllocationByIndex>::choose(
                                table,
                                &request.available,
                                &request.must_include,
                                request.size,
                            )
                        }
                        ::core::option::Option::None => ::core::result::Result::Err(
                            "no device table: the host called choose before set-devices".into(),
                        ),
                    })
                }
            }

            impl $crate::PreferredAllocation for __WdpByIndex {
                fn choose(
                    request: $crate::PreferredRequest,
                ) -> ::core::result::Result<::std::vec::Vec<::std::string::String>, ::std::string::String>
                {
                    $crate::by_index::choose_by_ids::<$ty>(
                        request.available,
                        request.must_include,
                        request.size,
                    )
                }
            }

            $crate::export_preferred_allocation!(__WdpByIndex);
            $crate::preferred_allocation_indexed_world::__export_preferred_allocation_indexed!(__WdpByIndex);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Must-include first, then the rest in table order; no checks of its
    /// own but the size.
    struct FirstFit;

    impl PreferredAllocationByIndex for FirstFit {
        type Table = usize;
        fn load(devices: Vec<DeviceRef>) -> usize {
            devices.len()
        }
        fn choose(
            _: &usize,
            available: &[u32],
            must: &[u32],
            size: u32,
        ) -> Result<Vec<u32>, String> {
            if available.len() < size as usize {
                return Err(format!(
                    "only {} devices available for an allocation of {size}",
                    available.len()
                ));
            }
            let mut chosen = must.to_vec();
            chosen.extend(available.iter().filter(|p| !must.contains(p)));
            chosen.truncate(size as usize);
            Ok(chosen)
        }
    }

    fn devices(ids: &[&str]) -> Vec<DeviceRef> {
        ids.iter()
            .map(|id| DeviceRef {
                id: (*id).into(),
                device_id: (*id).into(),
                numa_nodes: Vec::new(),
                attributes: Vec::new(),
                nodes: Vec::new(),
            })
            .collect()
    }

    #[test]
    fn unknown_must_include_in_the_contracts_order() {
        let choose = |must: &[&str], size| {
            choose_by_ids::<FirstFit>(
                devices(&["a", "b", "b"]),
                must.iter().map(|id| (*id).to_string()).collect(),
                size,
            )
        };
        assert_eq!(choose(&["b"], 2).unwrap(), ["b", "a"]);
        // Too few devices comes first, counting distinct IDs.
        assert_eq!(
            choose(&["zz"], 3).unwrap_err(),
            "only 2 devices available for an allocation of 3"
        );
        assert_eq!(
            choose(&["a", "z\"z"], 2).unwrap_err(),
            "must-include device \"z\\\"z\" is not available"
        );
        // Without an unknown ID the policy answers, with its own messages.
        assert_eq!(
            choose(&["a"], 4).unwrap_err(),
            "only 3 devices available for an allocation of 4"
        );
    }
}
