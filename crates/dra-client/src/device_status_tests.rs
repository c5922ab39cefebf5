//! Unit tests of merging device status entries.

use super::*;

fn entry(driver: &str, pool: &str, device: &str) -> AllocatedDeviceStatus {
    AllocatedDeviceStatus {
        driver: driver.into(),
        pool: pool.into(),
        device: device.into(),
        ..AllocatedDeviceStatus::default()
    }
}

fn keys(entries: &Option<Vec<AllocatedDeviceStatus>>) -> Vec<(&str, &str, &str)> {
    entries
        .iter()
        .flatten()
        .map(|e| (e.driver.as_str(), e.pool.as_str(), e.device.as_str()))
        .collect()
}

#[test]
fn our_entries_are_replaced_and_everyone_elses_kept() {
    let existing = vec![
        entry("gpu.example.com", "node-1", "gpu0"),
        entry("nic.example.com", "node-1", "nic0"),
        entry("gpu.example.com", "node-2", "gpu0"),
        entry("gpu.example.com", "node-1", "gpu1"),
    ];
    let merged = merge_device_status(
        Some(&existing),
        "gpu.example.com",
        "node-1",
        vec![entry("gpu.example.com", "node-1", "gpu3")],
    );
    assert_eq!(
        keys(&merged),
        vec![
            ("nic.example.com", "node-1", "nic0"),
            ("gpu.example.com", "node-2", "gpu0"),
            ("gpu.example.com", "node-1", "gpu3"),
        ]
    );
}

#[test]
fn clearing_the_last_entries_leaves_none() {
    let existing = vec![entry("gpu.example.com", "node-1", "gpu0")];
    assert_eq!(
        merge_device_status(Some(&existing), "gpu.example.com", "node-1", Vec::new()),
        None
    );
    assert_eq!(
        merge_device_status(None, "gpu.example.com", "node-1", Vec::new()),
        None
    );
    let theirs = vec![entry("nic.example.com", "node-1", "nic0")];
    assert_eq!(
        merge_device_status(Some(&theirs), "gpu.example.com", "node-1", Vec::new()),
        Some(theirs)
    );
}
