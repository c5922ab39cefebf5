//! The hooks of WIT 0.1.3 as a user of the runtime sees them:
//! `device-taints-v2` through the example guest `vfio-guard` (a `none`
//! taint for a degraded device, up to 16 taints), a guest exporting both
//! taint hooks asked only through `device-taints-v2`, a guest built
//! against 0.1.2 still loading and answering `device-taints` unchanged,
//! and `passthrough.may-bind` accepting and refusing binds with the
//! guest's reason as a `CallError` naming guest and hook.

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{
    BindRequest, CallError, Candidate, Device, DeviceFacts, DeviceTaint, DeviceTaintV2, Hook,
    PciFunction, TaintEffect, TaintEffectV2, Tainted, TaintedV2,
};

fn facts(device: &str, candidates: Vec<Candidate>) -> DeviceFacts {
    DeviceFacts {
        device: Device {
            id: device.to_string(),
            candidates: candidates.iter().map(|c| c.id.clone()).collect(),
            ..Device::default()
        },
        candidates,
    }
}

fn gpu(id: &str, degraded: Option<&str>) -> Candidate {
    let mut candidate = pci(id, "0x10de", "0x030200", Some("vfio-pci"), 0);
    if let Some(value) = degraded {
        candidate.attributes.push(("degraded".into(), value.into()));
    }
    candidate
}

#[test]
fn vfio_guard_gives_a_degraded_device_an_informational_taint() {
    let guest = load(artifacts::VFIO_GUARD);
    assert_eq!(guest.hooks(), [Hook::DeviceTaintsV2, Hook::Passthrough]);
    assert_eq!(guest.taint_hook(), Some(Hook::DeviceTaintsV2));
    assert!(guest.serves(Hook::DeviceTaints));
    let devices = [
        facts("a", vec![gpu("0000:3b:00.0", Some("ECC: 12 corrected"))]),
        facts("b", vec![gpu("0000:86:00.0", Some("0"))]),
    ];
    let tainted = guest.device_taints_v2(&ctx(&[]), &devices).unwrap();
    assert_eq!(
        tainted,
        [TaintedV2 {
            id: "a".into(),
            taints: vec![DeviceTaintV2 {
                key: "degraded".into(),
                value: "ECC-12-corrected".into(),
                effect: TaintEffectV2::None,
            }],
        }]
    );
    // The same through `taints`, which picks the hook.
    assert_eq!(guest.taints(&ctx(&[]), &devices).unwrap(), tainted);
    let evicting = guest
        .taints(&ctx(&[("degraded-effect", "no-execute")]), &devices)
        .unwrap();
    assert_eq!(evicting[0].taints[0].effect, TaintEffectV2::NoExecute);
}

#[test]
fn vfio_guard_fills_a_device_with_sixteen_taints() {
    let guest = load(artifacts::VFIO_GUARD);
    let devices = [facts("a", vec![gpu("0000:3b:00.0", Some("1"))])];
    let tainted = guest.taints(&ctx(&[("notes", "15")]), &devices).unwrap();
    assert_eq!(tainted[0].taints.len(), 16);
    assert_eq!(tainted[0].taints[15].key, "note-15");
    assert!(
        tainted[0]
            .taints
            .iter()
            .all(|t| t.effect == TaintEffectV2::None)
    );
}

#[test]
fn a_guest_exporting_both_taint_hooks_is_asked_only_the_v2_one() {
    let guest = load(artifacts::COMPAT_TAINTS_BOTH);
    assert_eq!(guest.hooks(), [Hook::DeviceTaints, Hook::DeviceTaintsV2]);
    assert_eq!(guest.taint_hook(), Some(Hook::DeviceTaintsV2));
    let tainted = guest.taints(&ctx(&[]), &[facts("d", vec![])]).unwrap();
    assert_eq!(
        tainted[0].taints,
        [DeviceTaintV2 {
            key: "asked".into(),
            value: "device-taints-v2".into(),
            effect: TaintEffectV2::None,
        }]
    );
}

#[test]
fn a_0_1_2_taints_guest_loads_and_answers_as_before() {
    let guest = load(artifacts::COMPAT_TAINTS_0_1_2);
    assert_eq!(guest.hooks(), [Hook::DeviceTaints]);
    assert_eq!(guest.taint_hook(), Some(Hook::DeviceTaints));
    guest.smoke_test(&ctx(&[])).unwrap();
    let asked = [facts("d", vec![])];
    let v1 = guest
        .device_taints(&ctx(&[("note", "kept")]), &asked)
        .unwrap();
    assert_eq!(
        v1,
        [Tainted {
            id: "d".into(),
            taints: vec![DeviceTaint {
                key: "legacy".into(),
                value: "kept".into(),
                effect: TaintEffect::NoSchedule,
            }],
        }]
    );
    // Through `taints`, converted to the 0.1.3 records unchanged.
    let converted = guest.taints(&ctx(&[("note", "kept")]), &asked).unwrap();
    assert_eq!(
        converted,
        v1.into_iter().map(TaintedV2::from).collect::<Vec<_>>()
    );
    assert_eq!(converted[0].taints[0].effect, TaintEffectV2::NoSchedule);
    // It does not export the new hook: calling it says so by name.
    let error = guest.device_taints_v2(&ctx(&[]), &asked).unwrap_err();
    assert!(
        matches!(
            error,
            CallError::NotExported {
                hook: Hook::DeviceTaintsV2,
                ..
            }
        ),
        "{error:?}"
    );
}

fn bind_request(functions: Vec<PciFunction>) -> BindRequest {
    BindRequest {
        claim: "vm/disk-vm".into(),
        claim_uid: "0f3c".into(),
        device_id: "0000:17:00.0".into(),
        driver: "vfio-pci".into(),
        iommu_group: "42".into(),
        functions,
    }
}

fn function(address: &str, driver: Option<&str>, class: &str) -> PciFunction {
    PciFunction {
        address: address.into(),
        driver: driver.map(str::to_string),
        attributes: pairs(&[("class", class), ("vendor", "0x10de")]),
    }
}

#[test]
fn vfio_guard_refuses_a_group_holding_the_nodes_disk() {
    let guest = load(artifacts::VFIO_GUARD);
    let gpu_only = bind_request(vec![
        function("0000:17:00.0", Some("nvidia"), "0x030200"),
        function("0000:17:00.1", Some("snd_hda_intel"), "0x040300"),
    ]);
    guest.may_bind(&ctx(&[]), &gpu_only).unwrap();

    let with_disk = bind_request(vec![
        function("0000:17:00.0", Some("nvidia"), "0x030200"),
        function("0000:17:00.2", Some("nvme"), "0x010802"),
    ]);
    let error = guest.may_bind(&ctx(&[]), &with_disk).unwrap_err();
    let CallError::GuestError {
        guest: name,
        hook,
        message,
    } = &error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (name.as_str(), *hook),
        ("vfio_guard.wasm", Hook::Passthrough)
    );
    assert!(
        message.contains("0000:17:00.2") && message.contains("nvme") && message.contains("42"),
        "{message}"
    );
    assert!(error.to_string().contains("passthrough"), "{error}");
    // A driver-less storage function is refused by its class.
    let unbound_disk = bind_request(vec![function("0000:17:00.3", None, "0x010601")]);
    let message = guest
        .may_bind(&ctx(&[]), &unbound_disk)
        .unwrap_err()
        .to_string();
    assert!(message.contains("0x010601"), "{message}");
    // The config decides what is kept.
    guest
        .may_bind(
            &ctx(&[("refuse-drivers", ""), ("refuse-classes", "")]),
            &with_disk,
        )
        .unwrap();
}
