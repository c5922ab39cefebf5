//! `numa-packing`: a preferred-allocation guest.
//!
//! Keeps the must-include IDs, then packs by NUMA node and link locality
//! (`link.group` attribute, else the PCIe switch from `pci.path`), best fit,
//! ties broken by ID. The logic lives in `wdp-packing-core` so the host can
//! benchmark the very same code natively.
//!
//! It exports the by-index form (`preferred-allocation-indexed`): the
//! device table is prepared once per device-set generation (IDs ranked,
//! link groups interned) and every call then works on integers only.

use wdp_guest_sdk::{DeviceRef, PreferredAllocationByIndex};
use wdp_packing_core::{Item, Table};

struct NumaPacking;

impl PreferredAllocationByIndex for NumaPacking {
    type Table = Table;

    fn load(devices: Vec<DeviceRef>) -> Table {
        let items: Vec<Item<'_>> = devices
            .iter()
            .map(|device| Item::new(&device.id, &device.numa_nodes, &device.attributes))
            .collect();
        Table::new(&items)
    }

    fn choose(
        table: &Table,
        available: &[u32],
        must_include: &[u32],
        size: u32,
    ) -> Result<Vec<u32>, String> {
        let size = usize::try_from(size).map_err(|e| e.to_string())?;
        table
            .choose(available, must_include, size)
            .map_err(|e| e.to_string())
    }
}

wdp_guest_sdk::export_preferred_allocation_by_index!(NumaPacking);
