//! `hostile-position-layout`: a `dra-layout` guest that names what it
//! describes by position, as the host must not let a guest do while a
//! claim holds a name. Each device `i` of the list gets counter set
//! `set-<i>` (8 slices) and two partitions `part-<i>-0`, `part-<i>-1`
//! drawing 4 slices each; with guest-config `reverse = "true"` the list is
//! walked from the end, so every name comes to mean other hardware.

use wdp_guest_sdk::{
    Counter, CounterConsumption, CounterSet, Device, DeviceLayout, DraLayout, Layout, Partition,
};

struct PositionLayout;

fn slices(set: &str, count: u32) -> Vec<CounterConsumption> {
    vec![CounterConsumption {
        counter_set: set.to_string(),
        counters: vec![Counter::new("slices", count.to_string())],
    }]
}

impl DraLayout for PositionLayout {
    fn describe(mut devices: Vec<Device>) -> Result<Layout, String> {
        if wdp_guest_sdk::config().get("reverse") == Some("true") {
            devices.reverse();
        }
        let mut layout = Layout {
            counter_sets: Vec::new(),
            devices: Vec::new(),
            partitions: Vec::new(),
        };
        for (i, device) in devices.iter().enumerate() {
            let set = format!("set-{i}");
            layout.counter_sets.push(CounterSet {
                name: set.clone(),
                counters: vec![Counter::new("slices", "8")],
            });
            layout.devices.push(DeviceLayout {
                id: device.id.clone(),
                consumes_counters: slices(&set, 8),
                capacity: Vec::new(),
                allow_multiple_allocations: false,
            });
            for half in 0..2 {
                layout.partitions.push(Partition {
                    id: format!("part-{i}-{half}"),
                    parent: device.id.clone(),
                    attributes: Vec::new(),
                    consumes_counters: slices(&set, 4),
                    capacity: Vec::new(),
                });
            }
        }
        Ok(layout)
    }
}

wdp_guest_sdk::export_dra_layout!(PositionLayout);
