use super::*;
use wdp_policy::types::{DeviceCondition, NetworkData};

fn ready(id: &str) -> DeviceStatus {
    DeviceStatus {
        id: id.to_owned(),
        conditions: vec![DeviceCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "PartitionCreated".into(),
            message: String::new(),
        }],
        data: Some(r#"{"profile":"1g.10gb"}"#.into()),
        network: Some(NetworkData {
            interface_name: "eth0v1".into(),
            ips: vec!["192.0.2.5/24".into(), "2001:db8::5/64".into()],
            hardware_address: "02:00:00:00:00:01".into(),
        }),
    }
}

#[test]
fn a_well_formed_status_passes() {
    assert_eq!(check_statuses(&[ready("a")], &["a".into()]), Ok(()));
}

#[test]
fn what_the_api_server_would_refuse_is_named() {
    let ids = vec!["a".to_owned()];
    let mut cases: Vec<(DeviceStatus, &str)> = Vec::new();
    cases.push((ready("b"), "not a device of the claim"));
    let mut s = ready("a");
    s.conditions[0].status = "yes".into();
    cases.push((s, "must be True, False or Unknown"));
    let mut s = ready("a");
    s.conditions[0].reason = "partition created".into();
    cases.push((s, "one CamelCase word"));
    let mut s = ready("a");
    s.data = Some("[1,2]".into());
    cases.push((s, "must be a JSON object"));
    let mut s = ready("a");
    s.data = Some(format!("{{\"x\":\"{}\"}}", "y".repeat(MAX_STATUS_DATA)));
    cases.push((s, "more than 10240"));
    let mut s = ready("a");
    s.conditions = (0..9)
        .map(|i| DeviceCondition {
            type_: format!("C{i}"),
            status: "True".into(),
            reason: "R".into(),
            message: String::new(),
        })
        .collect();
    cases.push((s, "more than 8"));
    let mut s = ready("a");
    s.network.as_mut().unwrap().ips = vec!["192.0.2.5".into()];
    cases.push((s, "CIDR"));
    for (status, expected) in cases {
        let error = check_statuses(&[status], &ids).unwrap_err();
        assert!(error.contains(expected), "{error} lacks {expected:?}");
    }
    assert!(
        check_statuses(&[ready("a"), ready("a")], &ids)
            .unwrap_err()
            .contains("twice")
    );
}
