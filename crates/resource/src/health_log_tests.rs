use std::collections::BTreeMap;

use wdp_policy::types::{Device, Verdict};

use super::*;

/// Devices `ids`, those in `sick` unhealthy because "hot".
fn set(ids: &[&str], sick: &[&str]) -> DeviceSet {
    let devices: Vec<Device> = ids
        .iter()
        .map(|id| Device {
            id: (*id).into(),
            ..Device::default()
        })
        .collect();
    let verdicts: BTreeMap<String, Verdict> = sick
        .iter()
        .map(|id| {
            (
                (*id).to_owned(),
                Verdict {
                    id: (*id).into(),
                    healthy: false,
                    reason: "hot".into(),
                },
            )
        })
        .collect();
    DeviceSet::build(&devices, &verdicts, &BTreeMap::new())
}

#[test]
fn a_device_flapping_every_100_ms_gets_one_line_per_interval_with_a_count() {
    let (healthy, sick) = (set(&["a"], &[]), set(&["a"], &["a"]));
    let mut log = HealthLog::default();
    let start = Instant::now();
    let mut lines = Vec::new();
    // 30 s of flapping: 300 changes.
    for tick in 0..300u32 {
        let now = start + Duration::from_millis(100 * u64::from(tick));
        let (before, after) = if tick % 2 == 0 {
            (&healthy, &sick)
        } else {
            (&sick, &healthy)
        };
        lines.extend(log.changes(before, after, now));
        lines.extend(log.catch_up(after, now));
    }
    // Four lines per 10 s interval instead of 100: the first four changes
    // as they happen, then the rest counted in the next interval's first.
    assert_eq!(lines.len(), 12, "{lines:?}");
    assert_eq!(lines[0].message(), "device a is unhealthy: hot");
    assert_eq!(lines[1].message(), "device a is healthy again");
    assert_eq!(
        lines[4].message(),
        "device a is unhealthy: hot (96 earlier health changes of this device not logged)"
    );
    // Settled healthy: the next refresh after the interval says so, once.
    let later = start + Duration::from_secs(45);
    let settled = log.catch_up(&healthy, later);
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert!(settled[0].message().starts_with("device a is healthy ("));
    assert_eq!(log.catch_up(&healthy, later + Duration::from_secs(60)), []);
    assert!(log.devices.is_empty(), "nothing kept once quiet");
}

#[test]
fn devices_are_limited_each_on_their_own_and_a_burst_is_summed_up() {
    let ids: Vec<String> = (0..15).map(|i| format!("d{i:02}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut log = HealthLog::default();
    let now = Instant::now();
    let lines = log.changes(&set(&ids, &[]), &set(&ids, &ids), now);
    assert_eq!(lines.len(), HEALTH_CHANGES_LOGGED + 1, "{lines:?}");
    assert_eq!(lines.last(), Some(&HealthLine::More(5)));
    // Another device's first change is logged although d00 was just logged.
    let lines = log.changes(&set(&["x"], &[]), &set(&["x"], &["x"]), now);
    assert_eq!(lines.len(), 1);
    // A device that fails and recovers at once is logged both times.
    let lines = log.changes(&set(&ids, &ids), &set(&ids, &ids[1..]), now);
    assert_eq!(lines[0].message(), "device d00 is healthy again");
}
