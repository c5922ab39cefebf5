use super::*;
use wdp_policy::types::{Counter, CounterSet, DeviceLayout, Partition};

/// Two GPUs, each with a counter set `set-<gpu>` it and its one partition
/// `part-<gpu>` draw on; `swap` gives each partition and set the other
/// GPU (what a guest naming them by position does when the order changes).
fn layout(swap: bool) -> Layout {
    let gpus = ["0000:3b:00.0", "0000:5e:00.0"];
    let on = |i: usize| gpus[if swap { 1 - i } else { i }].to_owned();
    let consume = |i: usize| {
        vec![CounterConsumption {
            counter_set: format!("set-{i}"),
            counters: vec![Counter {
                name: "memory".into(),
                value: "10Gi".into(),
            }],
        }]
    };
    Layout {
        counter_sets: (0..2)
            .map(|i| CounterSet {
                name: format!("set-{i}"),
                counters: vec![Counter {
                    name: "memory".into(),
                    value: "80Gi".into(),
                }],
            })
            .collect(),
        devices: (0..2)
            .map(|i| DeviceLayout {
                id: on(i),
                consumes_counters: consume(i),
                ..DeviceLayout::default()
            })
            .collect(),
        partitions: (0..2)
            .map(|i| Partition {
                id: format!("part-{i}"),
                parent: on(i),
                attributes: Vec::new(),
                consumes_counters: consume(i),
                capacity: Vec::new(),
            })
            .collect(),
    }
}

fn partition(id: &str, parent: &str) -> HeldDevice {
    HeldDevice {
        device_id: id.into(),
        partition_of: Some(parent.into()),
    }
}

fn whole(id: &str) -> HeldDevice {
    HeldDevice {
        device_id: id.into(),
        partition_of: None,
    }
}

#[test]
fn nothing_held_accepts_any_layout() {
    let held = HeldLayout::new(&[], &DraExtras::from_layout(layout(false)));
    assert!(held.is_empty());
    assert_eq!(held.check(&layout(true)), Ok(()));
}

#[test]
fn a_held_partition_moved_to_another_gpu_is_refused_naming_both() {
    let served = DraExtras::from_layout(layout(false));
    let held = HeldLayout::new(&[partition("part-0", "0000:3b:00.0")], &served);
    assert_eq!(held.check(&layout(false)), Ok(()));
    let refused = held.check(&layout(true)).unwrap_err();
    assert!(
        refused.contains("partition \"part-0\"")
            && refused.contains("0000:3b:00.0")
            && refused.contains("0000:5e:00.0"),
        "{refused}"
    );
}

#[test]
fn a_counter_set_a_held_whole_device_draws_on_may_not_move() {
    let served = DraExtras::from_layout(layout(false));
    let held = HeldLayout::new(&[whole("0000:5e:00.0")], &served);
    let refused = held.check(&layout(true)).unwrap_err();
    assert!(
        refused.contains("counter set \"set-1\"")
            && refused.contains("device 0000:5e:00.0")
            && refused.contains("device 0000:3b:00.0"),
        "{refused}"
    );
}

#[test]
fn a_held_name_the_layout_leaves_out_is_no_move() {
    let served = DraExtras::from_layout(layout(false));
    let held = HeldLayout::new(&[partition("part-0", "0000:3b:00.0")], &served);
    // The GPU's partitions and counters are gone from the layout.
    let mut without = layout(true);
    without.devices.clear();
    without.partitions.clear();
    assert_eq!(held.check(&without), Ok(()));
}

#[test]
fn names_nobody_holds_may_move() {
    let served = DraExtras::from_layout(layout(false));
    // Only the second GPU's partition is held; swapping moves both, so
    // it is refused; a layout moving only the first GPU's names is not.
    let held = HeldLayout::new(&[partition("part-1", "0000:5e:00.0")], &served);
    assert!(held.check(&layout(true)).is_err());
    let mut first_moved = layout(false);
    first_moved.partitions[0].parent = "0000:af:00.0".into();
    first_moved.devices[0].id = "0000:af:00.0".into();
    assert_eq!(held.check(&first_moved), Ok(()));
}
