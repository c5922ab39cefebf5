//! Tests of `taint_fit`: `None` left out before 1.35, too many taints
//! refused per device with the last good ones kept, each problem naming
//! resource, guest, hook, device and numbers.

use super::*;

const V1_37: ServerVersion = ServerVersion {
    major: 1,
    minor: 37,
};

fn taint(key: &str, effect: TaintEffectV2) -> DeviceTaintV2 {
    DeviceTaintV2 {
        key: key.into(),
        value: "v".into(),
        effect,
    }
}

fn notes(count: usize) -> Vec<DeviceTaintV2> {
    (1..=count)
        .map(|n| taint(&format!("note-{n}"), TaintEffectV2::NoSchedule))
        .collect()
}

fn extras(taints: &[(&str, Vec<DeviceTaintV2>)]) -> DraExtras {
    DraExtras {
        taints: taints
            .iter()
            .map(|(id, t)| ((*id).to_owned(), t.clone()))
            .collect(),
        taint_source: Some(TaintSource {
            resource: "example.com/gpu".into(),
            guest: "vfio_guard.wasm".into(),
            hook: Hook::DeviceTaintsV2,
        }),
        ..DraExtras::default()
    }
}

#[test]
fn the_limits_follow_the_version() {
    let old = TaintLimits::of(ServerVersion::V1_34);
    assert_eq!(
        (old.max_per_device, old.max_guest(), old.effect_none),
        (4, 3, false)
    );
    for version in [ServerVersion::V1_35, V1_37] {
        let new = TaintLimits::of(version);
        assert_eq!(
            (new.max_per_device, new.max_guest(), new.effect_none),
            (16, 15, true)
        );
    }
}

#[test]
fn before_the_version_is_known_the_taints_go_as_they_are() {
    let given = extras(&[("a", notes(15))]);
    let (fitted, problems) = TaintFit::default().fit(&given, None);
    assert_eq!(fitted, given);
    assert!(problems.is_empty());
}

#[test]
fn from_1_35_fifteen_taints_and_none_fit() {
    let mut taints = notes(14);
    taints.push(taint("degraded", TaintEffectV2::None));
    let given = extras(&[("a", taints)]);
    for version in [ServerVersion::V1_35, V1_37] {
        let (fitted, problems) = TaintFit::default().fit(&given, Some(TaintLimits::of(version)));
        assert_eq!(fitted, given, "{version}");
        assert!(problems.is_empty(), "{version}: {problems:?}");
    }
}

#[test]
fn on_1_34_none_taints_are_left_out_by_name() {
    let given = extras(&[(
        "a",
        vec![
            taint("degraded", TaintEffectV2::None),
            taint("ecc", TaintEffectV2::NoSchedule),
        ],
    )]);
    let limits = Some(TaintLimits::of(ServerVersion::V1_34));
    let (fitted, problems) = TaintFit::default().fit(&given, limits);
    assert_eq!(
        fitted.taints["a"],
        [taint("ecc", TaintEffectV2::NoSchedule)]
    );
    assert_eq!(problems.len(), 1);
    let message = problems[0].to_string();
    for words in [
        "resource example.com/gpu",
        "guest \"vfio_guard.wasm\" hook device-taints-v2",
        "device \"a\"",
        "degraded",
        "effect none",
        "1.34",
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    // A device with only informational taints keeps none.
    let only_none = extras(&[("a", vec![taint("degraded", TaintEffectV2::None)])]);
    let (fitted, _) = TaintFit::default().fit(&only_none, limits);
    assert!(fitted.taints.is_empty());
}

#[test]
fn too_many_for_the_server_keeps_the_devices_last_good_taints() {
    let limits = Some(TaintLimits::of(ServerVersion::V1_34));
    let mut fit = TaintFit::default();
    // First answer: fits (3 beside the health taint).
    let (fitted, problems) = fit.fit(&extras(&[("a", notes(3)), ("b", notes(1))]), limits);
    assert!(problems.is_empty());
    assert_eq!(fitted.taints["a"], notes(3));

    // Then device a gets 5: refused for a alone, b's new answer stands.
    let (fitted, problems) = fit.fit(&extras(&[("a", notes(5)), ("b", notes(2))]), limits);
    assert_eq!(fitted.taints["a"], notes(3), "a keeps its last good taints");
    assert_eq!(fitted.taints["b"], notes(2));
    assert_eq!(problems.len(), 1);
    let TaintProblem::TooMany {
        device,
        count,
        limit,
        kept,
        ..
    } = &problems[0]
    else {
        panic!("{problems:?}");
    };
    assert_eq!((device.as_str(), *count, *limit, *kept), ("a", 5, 3, 3));
    let message = problems[0].to_string();
    assert!(
        message.contains("5 taints, more than the 3")
            && message.contains("guest \"vfio_guard.wasm\" hook device-taints-v2")
            && message.contains("device \"a\""),
        "{message}"
    );

    // Still too many: still the same last good ones.
    let (fitted, again) = fit.fit(&extras(&[("a", notes(6))]), limits);
    assert_eq!(fitted.taints["a"], notes(3));
    assert_eq!(again.len(), 1);
    // Back within the limit: the new answer is published.
    let (fitted, problems) = fit.fit(&extras(&[("a", notes(2))]), limits);
    assert_eq!(fitted.taints["a"], notes(2));
    assert!(problems.is_empty());
}

#[test]
fn a_device_never_good_keeps_no_guest_taint_and_a_new_version_starts_afresh() {
    let mut fit = TaintFit::default();
    let too_many = extras(&[("a", notes(5))]);
    let (fitted, problems) = fit.fit(&too_many, Some(TaintLimits::of(ServerVersion::V1_34)));
    assert!(fitted.taints.is_empty());
    assert!(matches!(
        problems[..],
        [TaintProblem::TooMany { kept: 0, .. }]
    ));
    // The server was upgraded: the same answer fits.
    let (fitted, problems) = fit.fit(&too_many, Some(TaintLimits::of(ServerVersion::V1_35)));
    assert_eq!(fitted.taints["a"], notes(5));
    assert!(problems.is_empty());
}

/// Two GPUs whose guest gave each a `None` taint and a `NoSchedule` one,
/// GPU `b` unhealthy.
fn guest_tainted_set() -> DeviceSet {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use wdp_policy::types::{Device, Verdict};
    let devices: Vec<Device> = ["a", "b"]
        .iter()
        .map(|id| Device {
            id: (*id).into(),
            candidates: vec![(*id).into()],
            ..Device::default()
        })
        .collect();
    let verdicts = BTreeMap::from([(
        "b".to_owned(),
        Verdict {
            id: "b".into(),
            healthy: false,
            reason: "gone".into(),
        },
    )]);
    let taints = vec![
        taint("degraded", TaintEffectV2::None),
        taint("ecc", TaintEffectV2::NoSchedule),
    ];
    DeviceSet::build(&devices, &verdicts, &BTreeMap::new())
        .with_dra(Arc::new(extras(&[("a", taints.clone()), ("b", taints)])))
}

fn status(version: ServerVersion) -> PublishStatus {
    PublishStatus {
        server_version: Some(version),
        ..PublishStatus::default()
    }
}

#[test]
fn the_publishing_loop_fits_once_the_version_is_known_and_logs_once_per_change() {
    use wdp_dra_client::TaintEffect;
    const DRIVER: &str = "gpu.example.com";
    let set = guest_tainted_set();
    let mut fit = ServerFit::default();
    // Before the version: as the guest gave them, nothing to log.
    let (list, news) = fit.fitted(DRIVER, &set);
    assert_eq!(list.devices[0].taints.len(), 2);
    assert!(news.is_empty());
    assert!(!fit.learn(&PublishStatus::default()));

    assert!(fit.learn(&status(ServerVersion::V1_34)));
    assert!(!fit.learn(&status(ServerVersion::V1_34)), "known already");
    let (list, news) = fit.fitted(DRIVER, &set);
    let effects = |i: usize| -> Vec<(String, TaintEffect)> {
        list.devices[i]
            .taints
            .iter()
            .map(|t| (t.key.clone(), t.effect))
            .collect()
    };
    assert_eq!(
        effects(0),
        [("gpu.example.com/ecc".to_owned(), TaintEffect::NoSchedule)]
    );
    // The unhealthy GPU: the guest's taint, then the health taint.
    assert_eq!(effects(1).len(), 2);
    assert_eq!(effects(1)[1].0, "gpu.example.com/unhealthy");
    assert_eq!(news.len(), 2, "one per device: {news:?}");
    // The next poll with the same answer logs nothing.
    let (_, news) = fit.fitted(DRIVER, &set);
    assert!(news.is_empty(), "{news:?}");

    // A 1.35 server takes them all.
    assert!(fit.learn(&status(ServerVersion::V1_35)));
    let (list, news) = fit.fitted(DRIVER, &set);
    assert_eq!(list.devices[0].taints[0].effect, TaintEffect::None);
    assert_eq!(list.devices[1].taints.len(), 3);
    assert!(news.is_empty(), "{news:?}");
}
