//! Unit tests of the capacity and request policy rules.

use super::*;

const DRIVER: &str = "nic.example.com";

fn problems(device: &DraDevice) -> Vec<(String, String)> {
    let mut found = Vec::new();
    check_capacities(DRIVER, device, &mut |field, message| {
        found.push((field, message))
    });
    found
}

fn fields(problems: &[(String, String)]) -> Vec<&str> {
    problems.iter().map(|(field, _)| field.as_str()).collect()
}

fn range(min: &str, max: Option<&str>, step: Option<&str>) -> CapacityRange {
    CapacityRange {
        min: min.into(),
        max: max.map(Into::into),
        step: step.map(Into::into),
    }
}

fn shared_with(policy: CapacityPolicy) -> DraDevice {
    DraDevice::new("nic0")
        .shared()
        .with_capacity("bandwidth", Capacity::new("100G").with_policy(policy))
}

#[test]
fn good_capacities_have_no_problems() {
    let values = CapacityPolicy {
        default: Some("10G".into()),
        valid_values: vec!["1G".into(), "10G".into(), "100G".into()],
        valid_range: None,
    };
    assert_eq!(problems(&shared_with(values)), vec![]);
    let ranged = CapacityPolicy {
        default: Some("2G".into()),
        valid_values: Vec::new(),
        valid_range: Some(range("1G", Some("99G"), Some("1G"))),
    };
    assert_eq!(problems(&shared_with(ranged)), vec![]);
    let plain = DraDevice::new("nic1")
        .with_capacity("example.com/queues", Capacity::new("8"))
        .with_capacity("memory", Capacity::new("1.5Gi"));
    assert_eq!(problems(&plain), vec![]);
}

#[test]
fn names_and_values_are_checked() {
    let device = DraDevice::new("nic0")
        .with_capacity("1st", Capacity::new("1"))
        .with_capacity("nic.example.com/queues", Capacity::new("8"))
        .with_capacity("queues", Capacity::new("-8"))
        .with_capacity("speed", Capacity::new("fast"));
    let found = problems(&device);
    assert_eq!(
        fields(&found),
        vec![
            "capacity[\"1st\"]",
            "capacity[\"queues\"]",
            "capacity[\"queues\"].value",
            "capacity[\"speed\"].value"
        ],
        "{found:?}"
    );
    assert!(found[1].1.contains("also written as"), "{found:?}");
}

#[test]
fn a_request_policy_needs_multiple_allocations() {
    let device = DraDevice::new("nic0").with_capacity(
        "bandwidth",
        Capacity::new("100G").with_policy(CapacityPolicy::default()),
    );
    let found = problems(&device);
    assert_eq!(
        fields(&found),
        vec!["capacity[\"bandwidth\"].requestPolicy"]
    );
    assert!(found[0].1.contains("allowMultipleAllocations"), "{found:?}");
}

#[test]
fn valid_values_are_few_ascending_within_the_capacity_and_hold_the_default() {
    let found = problems(&shared_with(CapacityPolicy {
        default: Some("5G".into()),
        valid_values: vec!["10G".into(), "1G".into(), "1G".into(), "200G".into()],
        valid_range: None,
    }));
    let policy = "capacity[\"bandwidth\"].requestPolicy";
    assert_eq!(
        fields(&found),
        vec![
            format!("{policy}.validValues[1]").as_str(),
            format!("{policy}.validValues[2]").as_str(),
            format!("{policy}.validValues[3]").as_str(),
            format!("{policy}.default").as_str(),
        ],
        "{found:?}"
    );
    assert!(found[0].1.contains("out of order"));
    assert!(found[1].1.contains("twice"));
    assert!(found[2].1.contains("more than the capacity"));
    assert!(found[3].1.contains("not one of validValues"));

    let eleven = shared_with(CapacityPolicy {
        default: Some("1".into()),
        valid_values: (1..=11).map(|i| i.to_string()).collect(),
        valid_range: None,
    });
    let found = problems(&eleven);
    assert_eq!(
        fields(&found),
        vec![format!("{policy}.validValues").as_str()]
    );

    let no_default = shared_with(CapacityPolicy {
        default: None,
        valid_values: vec!["1G".into()],
        valid_range: None,
    });
    assert_eq!(
        fields(&problems(&no_default)),
        vec![format!("{policy}.default").as_str()]
    );

    let both = shared_with(CapacityPolicy {
        default: Some("1G".into()),
        valid_values: vec!["1G".into()],
        valid_range: Some(range("1G", None, None)),
    });
    assert_eq!(fields(&problems(&both)), vec![policy]);
}

#[test]
fn a_range_lies_within_the_capacity_and_holds_the_default_on_a_step() {
    let at = |field: &str| format!("capacity[\"bandwidth\"].requestPolicy.validRange.{field}");
    let check = |policy_range: CapacityRange, default: &str| {
        problems(&shared_with(CapacityPolicy {
            default: Some(default.into()),
            valid_values: Vec::new(),
            valid_range: Some(policy_range),
        }))
    };
    // min above max, max above the capacity.
    let found = check(range("50G", Some("200G"), None), "60G");
    assert_eq!(fields(&found), vec![at("max").as_str()], "{found:?}");
    let found = check(range("50G", Some("40G"), None), "45G");
    assert_eq!(
        fields(&found),
        vec![
            at("max").as_str(),
            at("default").as_str(),
            at("default").as_str()
        ],
        "{found:?}"
    );
    // min above the capacity, a negative min.
    assert_eq!(
        fields(&check(range("101G", None, None), "101G")),
        vec![at("min").as_str()]
    );
    assert_eq!(
        fields(&check(range("-1", None, None), "1")),
        vec![at("min").as_str()]
    );
    // A default outside the range.
    assert_eq!(
        fields(&check(range("10G", Some("20G"), None), "5G")),
        vec![at("default").as_str()]
    );
    // Steps: zero, too big for the capacity, a default and a max off-step.
    assert_eq!(
        fields(&check(range("1G", None, Some("0")), "1G")),
        vec![at("step").as_str()]
    );
    assert_eq!(
        fields(&check(range("50G", None, Some("60G")), "50G")),
        vec![at("step").as_str()]
    );
    let found = check(range("1G", Some("10G"), Some("2G")), "4G");
    assert_eq!(
        fields(&found),
        vec![at("default").as_str(), at("max").as_str()],
        "{found:?}"
    );
    assert!(found[0].1.contains("whole number of steps"), "{found:?}");
}
