//! `numa-packing`: a preferred-allocation guest.
//!
//! Keeps the must-include IDs, then packs by NUMA node and link locality
//! (`link.group` attribute, else the PCIe switch from `pci.path`), best fit,
//! ties broken by ID. The logic lives in `wdp-packing-core` so the host can
//! benchmark the very same code natively.

use wdp_guest_sdk::{PreferredAllocation, PreferredRequest};
use wdp_packing_core::{Item, choose};

struct NumaPacking;

impl PreferredAllocation for NumaPacking {
    fn choose(request: PreferredRequest) -> Result<Vec<String>, String> {
        let items: Vec<Item<'_>> = request
            .available
            .iter()
            .map(|device| Item::new(&device.id, &device.numa_nodes, &device.attributes))
            .collect();
        let must: Vec<&str> = request.must_include.iter().map(String::as_str).collect();
        let size = usize::try_from(request.size).map_err(|e| e.to_string())?;
        let chosen = choose(&items, &must, size).map_err(|e| e.to_string())?;
        Ok(chosen.into_iter().map(str::to_string).collect())
    }
}

wdp_guest_sdk::export_preferred_allocation!(NumaPacking);

/// Every call gets a fresh instance: never freeing is fine, and cheaper.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: wdp_guest_sdk::BumpAllocator = wdp_guest_sdk::BumpAllocator::new();
