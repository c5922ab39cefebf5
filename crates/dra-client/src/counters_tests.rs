//! Unit tests of the counter set and consumption rules.

use super::*;

fn set_problems(set: &CounterSet, version: ServerVersion) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    check_counter_set(set, version, &mut |field, message| {
        problems.push((field.to_owned(), message))
    });
    problems
}

fn consumption_problems(device: &DraDevice, version: ServerVersion) -> Vec<(String, String)> {
    let good = CounterSet::new("gpu0", [("memory", "40Gi"), ("slices", "4")]);
    let bad = CounterSet::new("broken", [("memory", "lots")]);
    let sets: BTreeMap<&str, KnownSet<'_>> = [
        (
            "gpu0",
            KnownSet {
                set: &good,
                valid: true,
            },
        ),
        (
            "broken",
            KnownSet {
                set: &bad,
                valid: false,
            },
        ),
    ]
    .into_iter()
    .collect();
    let mut problems = Vec::new();
    check_consumptions(device, &sets, version, &mut |field, message| {
        problems.push((field, message))
    });
    problems
}

fn fields(problems: &[(String, String)]) -> Vec<&str> {
    problems.iter().map(|(field, _)| field.as_str()).collect()
}

#[test]
fn a_good_counter_set_has_no_problems() {
    let set = CounterSet::new("gpu-0", [("memory", "40Gi"), ("slices", "7")]);
    assert_eq!(set_problems(&set, ServerVersion::V1_34), vec![]);
    assert_eq!(set_problems(&set, ServerVersion::V1_35), vec![]);
}

#[test]
fn counter_set_names_counters_and_values_are_checked() {
    let set = CounterSet::new("GPU_0", [("Memory", "40GB"), ("slices", "-1")]);
    let problems = set_problems(&set, ServerVersion::V1_35);
    assert_eq!(
        fields(&problems),
        vec![
            ".name",
            ".counters[\"Memory\"]",
            ".counters[\"Memory\"].value",
            ".counters[\"slices\"].value"
        ],
        "{problems:?}"
    );
    assert!(problems[2].1.contains("not a quantity"), "{problems:?}");
    assert!(problems[3].1.contains("negative"), "{problems:?}");

    let empty = CounterSet::new("empty", Vec::<(String, String)>::new());
    assert_eq!(
        fields(&set_problems(&empty, ServerVersion::V1_35)),
        vec![".counters"]
    );

    let crowded = CounterSet::new(
        "crowded",
        (0..33).map(|i| (format!("c{i}"), "1".to_owned())),
    );
    let problems = set_problems(&crowded, ServerVersion::V1_34);
    assert_eq!(fields(&problems), vec![".counters"]);
    assert!(problems[0].1.contains("33 counters"), "{problems:?}");
}

#[test]
fn a_good_consumption_has_no_problems() {
    let device = DraDevice::new("gpu0-part0").consuming("gpu0", [("memory", "10Gi")]);
    assert_eq!(consumption_problems(&device, ServerVersion::V1_35), vec![]);
    // All of it is fine too, in another spelling.
    let device = DraDevice::new("gpu0").consuming("gpu0", [("memory", "40960Mi"), ("slices", "4")]);
    assert_eq!(consumption_problems(&device, ServerVersion::V1_34), vec![]);
}

#[test]
fn a_consumption_must_name_a_set_and_counters_of_it_within_their_value() {
    let device = DraDevice::new("gpu0-part0")
        .consuming("gpu1", [("memory", "1Gi")])
        .consuming(
            "gpu0",
            [("memory", "41Gi"), ("power", "1"), ("slices", "x")],
        );
    let problems = consumption_problems(&device, ServerVersion::V1_34);
    assert_eq!(
        fields(&problems),
        vec![
            "consumesCounters[0].counterSet",
            "consumesCounters[1].counters[\"memory\"].value",
            "consumesCounters[1].counters[\"power\"]",
            "consumesCounters[1].counters[\"slices\"].value",
        ],
        "{problems:?}"
    );
    assert!(problems[0].1.contains("no counter set named \"gpu1\""));
    assert!(problems[1].1.contains("more than the 40Gi"), "{problems:?}");
    assert!(problems[2].1.contains("no counter named \"power\""));
}

#[test]
fn a_set_left_out_takes_its_consumers_with_it() {
    let device = DraDevice::new("d").consuming("broken", [("memory", "1")]);
    let problems = consumption_problems(&device, ServerVersion::V1_35);
    assert_eq!(fields(&problems), vec!["consumesCounters[0].counterSet"]);
    assert!(problems[0].1.contains("left out"), "{problems:?}");
}

#[test]
fn one_set_is_consumed_from_once() {
    let device = DraDevice::new("d")
        .consuming("gpu0", [("memory", "1Gi")])
        .consuming("gpu0", [("slices", "1")]);
    let problems = consumption_problems(&device, ServerVersion::V1_35);
    assert_eq!(fields(&problems), vec!["consumesCounters[1].counterSet"]);
}

#[test]
fn consumption_limits_follow_the_version() {
    // Three consumptions: too many for 1.35 (2), fine for 1.34 by count.
    let three = DraDevice::new("d")
        .consuming("gpu0", [("memory", "1Gi")])
        .consuming("x", [("a", "1")])
        .consuming("y", [("a", "1")]);
    let on_1_35 = consumption_problems(&three, ServerVersion::V1_35);
    assert_eq!(on_1_35[0].0, "consumesCounters");
    assert!(
        on_1_35[0]
            .1
            .contains("more than the 2 a 1.35 server allows")
    );
    let on_1_34 = consumption_problems(&three, ServerVersion::V1_34);
    assert!(
        on_1_34.iter().all(|(field, _)| field != "consumesCounters"),
        "{on_1_34:?}"
    );

    // 33 counters over two consumptions: too many for 1.34 (32 a device),
    // fine for 1.35 (32 a consumption).
    let many = DraDevice::new("d")
        .consuming("x", (0..20).map(|i| (format!("c{i}"), "1".to_owned())))
        .consuming("y", (0..13).map(|i| (format!("c{i}"), "1".to_owned())));
    let on_1_34 = consumption_problems(&many, ServerVersion::V1_34);
    assert!(
        on_1_34
            .iter()
            .any(|(field, message)| field == "consumesCounters" && message.contains("33 counters")),
        "{on_1_34:?}"
    );
    let on_1_35 = consumption_problems(&many, ServerVersion::V1_35);
    assert!(
        on_1_35.iter().all(|(field, _)| field != "consumesCounters"),
        "{on_1_35:?}"
    );
}
