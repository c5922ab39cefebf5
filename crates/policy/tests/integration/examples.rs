//! The example guests answer as documented; load-time checks refuse bad
//! guests with messages naming the offending item.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{
    CallErrorKind, CandidateKind, ContainerResponse, Device, DeviceFacts, DeviceSpec, Hook,
    LoadError, PreferredRequest,
};

#[test]
fn pci_filter_keeps_matching_vendors_and_classes() {
    let guest = load(artifacts::PCI_FILTER);
    assert_eq!(guest.hooks(), [Hook::Discovery]);
    assert!(guest.exports(Hook::Discovery));
    assert!(!guest.exports(Hook::Health));

    let mut nvme_node = pci("nvme0n1", "", "", None, 0);
    nvme_node.kind = CandidateKind::Node;
    nvme_node.attributes.clear();
    let candidates = vec![
        pci("0000:3b:00.0", "0x10de", "0x030200", Some("nvidia"), 0),
        pci("0000:af:00.0", "0x1002", "0x030000", Some("amdgpu"), 1),
        pci("0000:18:00.0", "0x8086", "0x020000", Some("ice"), 0),
        pci(
            "0000:5e:00.0",
            "0x10DE",
            "0x040300",
            Some("snd_hda_intel"),
            0,
        ),
        nvme_node,
    ];
    let config = [
        ("vendors", "0x10de, 0x1002"),
        ("classes", "0x0302,0x0300"),
        ("replicas", "2"),
    ];
    let devices = guest.discover(&ctx(&config), &candidates).unwrap();
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["0000:3b:00.0", "0000:af:00.0", "nvme0n1"]);
    assert_eq!(
        devices[0],
        Device {
            id: "0000:3b:00.0".into(),
            candidates: vec!["0000:3b:00.0".into()],
            numa_nodes: vec![0],
            attributes: candidates[0].attributes.clone(),
            replicas: 2,
        }
    );
    assert_eq!(devices[1].numa_nodes, [1]);

    // Without config every candidate passes, once.
    let all = guest.discover(&ctx(&[]), &candidates).unwrap();
    assert_eq!(all.len(), 5);
    assert!(all.iter().all(|d| d.replicas == 1));

    // A bad config value is the guest's error, naming the key.
    let error = guest
        .discover(&ctx(&[("replicas", "many")]), &candidates)
        .unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert!(error.to_string().contains("replicas"), "{error}");
    assert!(error.to_string().contains("pci_filter.wasm"), "{error}");
}

fn facts(device: &str, candidates: Vec<wdp_policy::Candidate>) -> DeviceFacts {
    DeviceFacts {
        device: Device {
            id: device.to_string(),
            candidates: candidates.iter().map(|c| c.id.clone()).collect(),
            ..Device::default()
        },
        candidates,
    }
}

#[test]
fn presence_health_follows_presence_and_driver() {
    let guest = load(artifacts::PRESENCE_HEALTH);
    let ok = pci("0000:3b:00.0", "0x10de", "0x030200", Some("nvidia"), 0);
    let mut gone = pci("0000:3c:00.0", "0x10de", "0x030200", Some("nvidia"), 0);
    gone.present = false;
    let unbound = pci("0000:3d:00.0", "0x10de", "0x030200", None, 0);
    let nouveau = pci("0000:3e:00.0", "0x10de", "0x030200", Some("nouveau"), 0);
    let mut tty = pci("ttyUSB0", "", "", None, 0);
    tty.kind = CandidateKind::Node;

    let devices = vec![
        facts("ok", vec![ok.clone()]),
        facts("gone", vec![gone.clone()]),
        facts("unbound", vec![unbound]),
        facts("nouveau", vec![nouveau]),
        facts("tty", vec![tty]),
    ];
    let verdicts = guest
        .check_health(&ctx(&[("drivers", "nvidia,vfio-pci")]), &devices)
        .unwrap();
    let by_id = |id: &str| verdicts.iter().find(|v| v.id == id).unwrap().clone();
    assert!(by_id("ok").healthy, "{:?}", by_id("ok"));
    assert!(!by_id("gone").healthy);
    assert!(
        by_id("gone").reason.contains("not present"),
        "{:?}",
        by_id("gone")
    );
    assert!(!by_id("unbound").healthy);
    assert!(by_id("unbound").reason.contains("no driver"));
    assert!(!by_id("nouveau").healthy);
    assert!(by_id("nouveau").reason.contains("nouveau"));
    assert!(by_id("tty").healthy);

    // Healthy again once the hardware is back.
    let mut back = gone;
    back.present = true;
    let verdicts = guest
        .check_health(&ctx(&[]), &[facts("gone", vec![back])])
        .unwrap();
    assert!(verdicts[0].healthy);

    // A candidate missing from the facts altogether.
    let mut lost = facts("lost", vec![]);
    lost.device.candidates = vec!["0000:99:00.0".into()];
    let verdicts = guest.check_health(&ctx(&[]), &[lost]).unwrap();
    assert!(!verdicts[0].healthy);
    assert!(verdicts[0].reason.contains("0000:99:00.0"));
}

fn packing_request(must: &[&str], size: u32) -> PreferredRequest {
    let mut available = Vec::new();
    for i in 0..8 {
        let numa = i64::from(i >= 3); // gpu0-2 on node 0, gpu3-7 on node 1
        let group = if i < 3 {
            "sw0"
        } else if i < 5 {
            "sw1"
        } else {
            "sw2"
        };
        available.push(device_ref(
            &format!("gpu{i}"),
            numa,
            &[("link.group", group)],
        ));
    }
    PreferredRequest {
        available,
        must_include: must.iter().map(|s| s.to_string()).collect(),
        size,
    }
}

#[test]
fn numa_packing_packs_by_numa_and_link() {
    let guest = load(artifacts::NUMA_PACKING);
    let c = ctx(&[]);
    // Node 1 has the most devices; best fit picks the 2-device switch.
    assert_eq!(
        guest.choose(&c, &packing_request(&[], 2)).unwrap(),
        ["gpu3", "gpu4"]
    );
    // Must-include on node 0 pulls the rest onto node 0, same switch first.
    assert_eq!(
        guest.choose(&c, &packing_request(&["gpu1"], 3)).unwrap(),
        ["gpu1", "gpu0", "gpu2"]
    );
    // Spills over to the other node when needed, exact size, distinct.
    let got = guest.choose(&c, &packing_request(&["gpu0"], 6)).unwrap();
    assert_eq!(got.len(), 6);
    assert_eq!(got[..3], ["gpu0", "gpu1", "gpu2"]);
    let mut unique = got.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 6);
    // Impossible requests are the guest's error.
    let error = guest
        .choose(&c, &packing_request(&["gpu9"], 1))
        .unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert!(error.to_string().contains("gpu9"), "{error}");

    // Same answer as the same code compiled natively.
    let request = packing_request(&["gpu6"], 4);
    let items: Vec<_> = request
        .available
        .iter()
        .map(|d| wdp_packing_core::Item::new(&d.id, &d.numa_nodes, &d.attributes))
        .collect();
    let native = wdp_packing_core::choose(&items, &["gpu6"], 4).unwrap();
    assert_eq!(guest.choose(&c, &request).unwrap(), native);
}

#[test]
fn allocate_shaper_adds_env_and_cdi() {
    let guest = load(artifacts::ALLOCATE_SHAPER);
    let devices = vec![
        device_ref("gpu0::0", 0, &[]),
        device_ref("gpu0::1", 0, &[]),
        device_ref("gpu1", 0, &[]),
    ];
    let default = ContainerResponse {
        devices: devices
            .iter()
            .map(|d| DeviceSpec {
                container_path: d.nodes[0].path.clone(),
                host_path: d.nodes[0].path.clone(),
                permissions: "rw".into(),
            })
            .collect(),
        ..ContainerResponse::default()
    };

    let response = guest.allocate(&ctx(&[]), &devices, &default).unwrap();
    assert_eq!(
        response.envs,
        pairs(&[("WDP_VISIBLE_DEVICES", "gpu0,gpu1")])
    );
    assert_eq!(response.devices, default.devices);
    assert_eq!(
        response.annotations,
        pairs(&[("wasm-device-plugin/devices", "gpu0,gpu1")])
    );
    assert!(response.cdi_devices.is_empty());

    let config = [("env-prefix", "NVIDIA"), ("cdi-kind", "example.com/gpu")];
    let response = guest.allocate(&ctx(&config), &devices, &default).unwrap();
    assert_eq!(
        response.envs,
        pairs(&[("NVIDIA_VISIBLE_DEVICES", "gpu0,gpu1")])
    );
    assert!(response.devices.is_empty());
    assert_eq!(
        response.cdi_devices,
        ["example.com/gpu=gpu0", "example.com/gpu=gpu1"]
    );

    let error = guest
        .allocate(&ctx(&[("env-prefix", "BAD PREFIX")]), &devices, &default)
        .unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
}

#[test]
fn allocate_shaper_names_gpus_by_index_or_uuid() {
    let guest = load(artifacts::ALLOCATE_SHAPER);
    let devices = vec![
        device_ref(
            "0000:07:00.0",
            0,
            &[("nvidia.minor", "2"), ("nvidia.uuid", "GPU-aaaa-0002")],
        ),
        device_ref(
            "0000:03:00.0",
            0,
            &[("nvidia.minor", "0"), ("nvidia.uuid", "GPU-aaaa-0000")],
        ),
    ];
    let default = ContainerResponse::default();
    let visible = |mode: &str| {
        let config = [("env-prefix", "NVIDIA"), ("visible-devices", mode)];
        guest
            .allocate(&ctx(&config), &devices, &default)
            .map(|r| r.envs)
    };
    assert_eq!(
        visible("index").unwrap(),
        pairs(&[("NVIDIA_VISIBLE_DEVICES", "2,0")])
    );
    assert_eq!(
        visible("uuid").unwrap(),
        pairs(&[("NVIDIA_VISIBLE_DEVICES", "GPU-aaaa-0002,GPU-aaaa-0000")])
    );
    assert_eq!(
        visible("id").unwrap(),
        pairs(&[("NVIDIA_VISIBLE_DEVICES", "0000:07:00.0,0000:03:00.0")])
    );
    let error = visible("serial").unwrap_err();
    assert!(error.to_string().contains("visible-devices"), "{error}");

    // A device without the attribute asked for is named.
    let plain = vec![device_ref("fuse", 0, &[])];
    let error = guest
        .allocate(&ctx(&[("visible-devices", "uuid")]), &plain, &default)
        .unwrap_err();
    assert!(
        error.to_string().contains("fuse") && error.to_string().contains("nvidia.uuid"),
        "{error}"
    );
}

#[test]
fn pre_start_check_looks_at_fresh_hardware() {
    let guest = load(artifacts::PRE_START_CHECK);
    let hardware = Arc::new(FakeHardware {
        candidates: vec![
            pci("gpu0", "0x10de", "0x030200", Some("nvidia"), 0),
            pci("gpu1", "0x10de", "0x030200", Some("nvidia"), 0),
        ]
        .into(),
        attributes: [(
            ("gpu0".into(), "current_link_speed".into()),
            "16.0 GT/s PCIe".into(),
        )]
        .into(),
        ..FakeHardware::default()
    });
    let devices = vec![
        device_ref("gpu0", 0, &[("pci.driver", "nvidia")]),
        device_ref("gpu1", 0, &[]),
    ];
    let limits = wdp_policy::CallLimits::default();

    // Present: ok; the attribute read goes through the host.
    let c = ctx_with(
        Arc::clone(&hardware),
        &[("log-attribute", "current_link_speed")],
        limits,
    );
    guest.pre_start(&c, &devices).unwrap();
    assert_eq!(hardware.reads.load(Ordering::SeqCst), 2);

    // A required attribute one device lacks.
    let c = ctx_with(
        Arc::clone(&hardware),
        &[("require-attribute", "pci.driver")],
        limits,
    );
    let error = guest.pre_start(&c, &devices).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert!(
        error
            .to_string()
            .contains("gpu1 lacks attribute pci.driver"),
        "{error}"
    );

    // Hardware gone.
    hardware.candidates.lock().unwrap()[1].present = false;
    let c = ctx_with(Arc::clone(&hardware), &[], limits);
    let error = guest.pre_start(&c, &devices).unwrap_err();
    assert!(
        error.to_string().contains("candidate gpu1 is not present"),
        "{error}"
    );
    assert!(
        error.to_string().contains("pre_start_check.wasm"),
        "{error}"
    );
    assert!(error.to_string().contains("hook pre-start"), "{error}");
}

#[test]
fn every_example_and_hostile_guest_passes_its_smoke_test() {
    for (name, path) in artifacts::EXAMPLES.iter().chain(&[
        ("hostile-infinite-loop", artifacts::HOSTILE_INFINITE_LOOP),
        ("hostile-memory-bomb", artifacts::HOSTILE_MEMORY_BOMB),
        ("hostile-trap", artifacts::HOSTILE_TRAP),
        ("hostile-sleeper", artifacts::HOSTILE_SLEEPER),
        ("hostile-nonsense", artifacts::HOSTILE_NONSENSE),
    ]) {
        let guest = load(path);
        guest
            .smoke_test(&ctx(&[]))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn same_bytes_compile_once_and_keep_their_hash() {
    let bytes = std::fs::read(artifacts::PRESENCE_HEALTH).unwrap();
    let a = engine().load_bytes("a.wasm", &bytes).unwrap();
    let b = engine().load_bytes("b.wasm", &bytes).unwrap();
    assert_eq!(a.content_hash(), b.content_hash());
    assert_eq!(a.content_hash().len(), 64);
    assert_eq!(a.name(), "a.wasm");
    assert_eq!(b.name(), "b.wasm");
    let other = load(artifacts::PCI_FILTER);
    assert_ne!(other.content_hash(), a.content_hash());
}

#[test]
fn a_newer_patch_version_of_the_wit_loads() {
    let guest = load(artifacts::COMPAT_NEWER_PATCH);
    assert_eq!(guest.hooks(), [Hook::Health, Hook::DeviceTaints]);
    let verdicts = guest
        .check_health(&ctx(&[("note", "fine")]), &[facts("d", vec![])])
        .unwrap();
    assert_eq!(verdicts[0].reason, "fine");
    // A 0.1.2 hook of the newer guest, sharing `health.device-facts`.
    let tainted = guest
        .device_taints(&ctx(&[("note", "fine")]), &[facts("d", vec![])])
        .unwrap();
    assert_eq!(
        tainted,
        [wdp_policy::Tainted {
            id: "d".into(),
            taints: vec![wdp_policy::DeviceTaint {
                key: "example.com/note".into(),
                value: "fine".into(),
                effect: wdp_policy::TaintEffect::NoExecute,
            }],
        }]
    );
}

fn load_error(path: &str) -> LoadError {
    engine()
        .load_file(std::path::Path::new(path))
        .expect_err("the guest must be refused")
}

#[test]
fn an_export_that_is_no_hook_is_refused_by_name() {
    let error = load_error(artifacts::HOSTILE_WRONG_EXPORT);
    assert!(
        matches!(error, LoadError::UnknownExport { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("hostile_wrong_export.wasm"), "{message}");
    assert!(
        message.contains("`wdp-test:extra/telemetry@0.1.0`"),
        "{message}"
    );
}

#[test]
fn a_missing_import_is_refused_by_name() {
    let error = load_error(artifacts::HOSTILE_BAD_IMPORT);
    assert!(
        matches!(error, LoadError::UnknownImport { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("hostile_bad_import.wasm"), "{message}");
    assert!(
        message.contains("wasm-device-plugin:policy/hardware@0.1.0#reset-device"),
        "{message}"
    );
}

#[test]
fn another_wit_version_is_refused_by_name() {
    let error = load_error(artifacts::HOSTILE_WRONG_VERSION);
    assert!(
        matches!(error, LoadError::IncompatibleVersion { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("hostile_wrong_version.wasm"), "{message}");
    assert!(
        message.contains("wasm-device-plugin:policy/health@0.2.0"),
        "{message}"
    );
    assert!(message.contains("0.1.x"), "{message}");
}

#[test]
fn a_component_without_hooks_or_a_core_module_is_refused() {
    // The smallest valid component: header only, no exports.
    let empty_component = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
    let error = engine()
        .load_bytes("empty.wasm", &empty_component)
        .unwrap_err();
    assert!(matches!(error, LoadError::NoHook { .. }), "{error:?}");
    assert!(
        error.to_string().contains("\"empty.wasm\" exports no hook"),
        "{error}"
    );

    let core_module = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
    let error = engine().load_bytes("core.wasm", &core_module).unwrap_err();
    assert!(matches!(error, LoadError::Compile { .. }), "{error:?}");
    assert!(error.to_string().contains("core.wasm"), "{error}");

    let error = engine().load_bytes("junk.wasm", b"not wasm").unwrap_err();
    assert!(matches!(error, LoadError::Compile { .. }), "{error:?}");

    let error = engine()
        .load_file(std::path::Path::new("/nonexistent/guest.wasm"))
        .unwrap_err();
    assert!(matches!(error, LoadError::Read { .. }), "{error:?}");
    assert!(
        error.to_string().contains("/nonexistent/guest.wasm"),
        "{error}"
    );
}

#[test]
fn hook_names_parse_and_display() {
    for hook in Hook::ALL {
        assert_eq!(hook.to_string().parse::<Hook>().unwrap(), hook);
    }
    assert_eq!(Hook::PreStart.to_string(), "pre-start");
    assert!("prestart".parse::<Hook>().is_err());
}

#[test]
fn iommu_group_makes_one_device_per_group() {
    let guest = load(artifacts::IOMMU_GROUP);
    assert_eq!(guest.hooks(), [Hook::Discovery]);
    let in_group = |id: &str, device: &str, group: Option<&str>, numa: i64| {
        let mut c = pci(id, "0x10de", "0x030000", Some("vfio-pci"), numa);
        c.attributes.push(("pci.device".into(), device.into()));
        if let Some(group) = group {
            c.attributes.push(("pci.iommu-group".into(), group.into()));
        }
        c
    };
    let mut gone = in_group("0000:99:00.0", "0x24b0", Some("7"), 0);
    gone.present = false;
    let mut host_owned = in_group("0000:3d:00.0", "0x1572", Some("32"), 1);
    host_owned.attributes.retain(|(k, _)| k != "pci.driver");
    host_owned
        .attributes
        .push(("pci.driver".into(), "i40e".into()));
    let mut candidates = vec![
        in_group("0000:17:00.1", "0x228b", Some("30"), 0),
        in_group("0000:3d:02.0", "0x154c", Some("33"), 1),
        in_group("0000:17:00.0", "0x24b0", Some("30"), 0),
        in_group("0000:50:00.0", "0x24b0", None, 0),
        host_owned,
        gone,
    ];
    let devices = guest.discover(&ctx(&[]), &candidates).unwrap();
    let ids: Vec<&str> = devices.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["iommu-group-30", "iommu-group-33"]);
    assert_eq!(devices[0].candidates, ["0000:17:00.0", "0000:17:00.1"]);
    assert_eq!(devices[0].numa_nodes, [0]);
    assert_eq!(devices[1].numa_nodes, [1]);
    let attr = |d: &Device, k: &str| {
        d.attributes
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(attr(&devices[0], "vfio.group").as_deref(), Some("30"));
    assert_eq!(
        attr(&devices[0], "pci.addresses").as_deref(),
        Some("0000:17:00.0,0000:17:00.1")
    );
    assert_eq!(attr(&devices[0], "pci.device").as_deref(), Some("0x24b0"));
    assert_eq!(attr(&devices[0], "vfio.viable").as_deref(), Some("true"));

    // A member taken by a host driver stays in its group, which is then
    // not viable; a group with no function for passthrough is no device.
    candidates[0].attributes.retain(|(k, _)| k != "pci.driver");
    candidates[0]
        .attributes
        .push(("pci.driver".into(), "snd_hda_intel".into()));
    let devices = guest.discover(&ctx(&[]), &candidates).unwrap();
    assert_eq!(devices[0].candidates, ["0000:17:00.0", "0000:17:00.1"]);
    assert_eq!(attr(&devices[0], "vfio.viable").as_deref(), Some("false"));
    let devices = guest
        .discover(&ctx(&[("drivers", "vfio-pci,snd_hda_intel")]), &candidates)
        .unwrap();
    assert_eq!(attr(&devices[0], "vfio.viable").as_deref(), Some("true"));

    let renamed = guest
        .discover(&ctx(&[("id-prefix", "vfio-")]), &candidates)
        .unwrap();
    assert_eq!(renamed[1].id, "vfio-33");
    let error = guest
        .discover(&ctx(&[("id-prefix", "bad prefix/")]), &candidates)
        .unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert!(error.to_string().contains("id-prefix"), "{error}");
}
