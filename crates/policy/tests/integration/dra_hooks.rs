//! The DRA hooks of WIT 0.1.2 as a user of the runtime sees them, through
//! the example guest `gpu-partitions`: the layout it describes (counter
//! sets, partitions, what each consumes), what preparing a claim creates
//! and reports, a failed create as a `CallError` naming guest and hook,
//! unprepare removing what exists; and `claim.devices` reaching a guest.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::common::*;
use wdp_guest_artifacts as artifacts;
use wdp_policy::{
    CallContext, CallErrorKind, CallLimits, Candidate, ClaimDevice, ClaimInfo, ContainerResponse,
    Counter, CounterConsumption, CounterSet, Device, DeviceCondition, DeviceLayout, Hook,
    HostServices, Layout,
};

const GPU_A: &str = "0000:3b:00.0";
const GPU_B: &str = "0000:86:00.0";

/// GPUs whose driver creates partitions when a partition ID is written to
/// `partition_create` and removes them when `-<id>` is written to
/// `partition_remove` (the guest's default attribute names).
#[derive(Default)]
struct PartitioningGpus {
    candidates: Vec<Candidate>,
    /// Every write as `(candidate, attribute, value)`, in order.
    writes: Mutex<Vec<(String, String, String)>>,
    /// The partitions that exist, as `(candidate, partition ID)`.
    partitions: Mutex<BTreeSet<(String, String)>>,
    /// A partition ID whose create the driver refuses.
    refuse: Option<String>,
}

impl PartitioningGpus {
    fn new(refuse: Option<&str>) -> Arc<Self> {
        Arc::new(Self {
            candidates: [GPU_A, GPU_B]
                .iter()
                .map(|id| pci(id, "0x10de", "0x030200", Some("nvidia"), 0))
                .collect(),
            refuse: refuse.map(str::to_string),
            ..Self::default()
        })
    }

    fn writes(&self) -> Vec<(String, String, String)> {
        self.writes.lock().unwrap().clone()
    }

    fn existing(&self) -> Vec<(String, String)> {
        self.partitions.lock().unwrap().iter().cloned().collect()
    }
}

impl HostServices for PartitioningGpus {
    fn candidates(&self) -> Vec<Candidate> {
        self.candidates.clone()
    }

    fn read_attribute(&self, candidate_id: &str, name: &str) -> Result<String, String> {
        Err(format!("{candidate_id} has no attribute {name}"))
    }

    fn write_attribute(&self, candidate_id: &str, name: &str, value: &str) -> Result<(), String> {
        self.writes.lock().unwrap().push((
            candidate_id.to_string(),
            name.to_string(),
            value.to_string(),
        ));
        let mut partitions = self.partitions.lock().unwrap();
        match name {
            "partition_create" if self.refuse.as_deref() == Some(value) => {
                Err("write error: No space left on device (os error 28)".to_string())
            }
            "partition_create" => {
                partitions.insert((candidate_id.to_string(), value.to_string()));
                Ok(())
            }
            "partition_remove" => {
                let id = value.strip_prefix('-').ok_or("expected -<id>")?;
                if partitions.remove(&(candidate_id.to_string(), id.to_string())) {
                    Ok(())
                } else {
                    Err(format!("no such partition {id}"))
                }
            }
            _ => Err(format!("writing {name} of {candidate_id} is not granted")),
        }
    }
}

fn gpu(id: &str) -> Device {
    Device {
        id: id.to_string(),
        candidates: vec![id.to_string()],
        ..Device::default()
    }
}

fn partition(id: &str, gpu: &str) -> ClaimDevice {
    ClaimDevice {
        id: id.to_string(),
        device_id: gpu.to_string(),
        partition: true,
        request: "gpu".to_string(),
        ..ClaimDevice::default()
    }
}

fn whole(gpu: &str) -> ClaimDevice {
    ClaimDevice {
        id: gpu.to_string(),
        device_id: gpu.to_string(),
        partition: false,
        request: "gpu".to_string(),
        ..ClaimDevice::default()
    }
}

fn claim_with(uid: &str, devices: Vec<ClaimDevice>) -> Arc<ClaimInfo> {
    Arc::new(ClaimInfo {
        namespace: "team-a".into(),
        name: "inference".into(),
        uid: uid.into(),
        requests: vec!["gpu".into()],
        configs: Vec::new(),
        devices,
    })
}

/// A prepare or unprepare context: the GPUs, `config`, and the claim.
fn dra_ctx(
    gpus: &Arc<PartitioningGpus>,
    config: &[(&str, &str)],
    uid: &str,
    devices: &[ClaimDevice],
) -> CallContext {
    CallContext {
        services: Arc::clone(gpus) as Arc<dyn HostServices>,
        config: Arc::new(pairs(config)),
        resource: "example.com/gpu".to_string(),
        ..CallContext::new(CallLimits::default())
    }
    .with_claim(claim_with(uid, devices.to_vec()))
}

/// A UID whose bytes sum to an even number (creates succeed under
/// `fail-create = "half"`), and one whose bytes sum to an odd number.
const EVEN_UID: &str = "4f1c6a52-0d3e-4a59-9a35-0f6b1d7c2e10";
const ODD_UID: &str = "4f1c6a52-0d3e-4a59-9a35-0f6b1d7c2e11";

fn counters(memory: &str, slices: &str) -> Vec<Counter> {
    vec![
        Counter {
            name: "memory".into(),
            value: memory.into(),
        },
        Counter {
            name: "slices".into(),
            value: slices.into(),
        },
    ]
}

fn takes(set: &str, memory: &str, slices: &str) -> Vec<CounterConsumption> {
    vec![CounterConsumption {
        counter_set: set.into(),
        counters: counters(memory, slices),
    }]
}

#[test]
fn gpu_partitions_exports_the_three_dra_hooks() {
    let guest = load(artifacts::GPU_PARTITIONS);
    assert_eq!(
        guest.hooks(),
        [Hook::DraLayout, Hook::DraPrepare, Hook::DraUnprepare]
    );
    assert!(!guest.exports(Hook::DeviceTaints));
    // The hardware import (sysfs writes) makes its calls possibly blocking.
    assert!(guest.may_block_in_host());
    guest.smoke_test(&ctx(&[])).unwrap();
}

#[test]
fn the_layout_of_two_gpus_shares_each_gpus_counters_among_its_partitions() {
    let guest = load(artifacts::GPU_PARTITIONS);
    let layout: Layout = guest
        .describe_layout(&ctx(&[]), &[gpu(GPU_A), gpu(GPU_B)])
        .unwrap();

    assert_eq!(
        layout.counter_sets,
        [
            CounterSet {
                name: "gpu-0000-3b-00-0".into(),
                counters: counters("80Gi", "7"),
            },
            CounterSet {
                name: "gpu-0000-86-00-0".into(),
                counters: counters("80Gi", "7"),
            },
        ]
    );
    // A whole GPU takes all of its set: never allocated beside a partition.
    assert_eq!(
        layout.devices,
        [
            DeviceLayout {
                id: GPU_A.into(),
                consumes_counters: takes("gpu-0000-3b-00-0", "80Gi", "7"),
                capacity: vec![],
                allow_multiple_allocations: false,
            },
            DeviceLayout {
                id: GPU_B.into(),
                consumes_counters: takes("gpu-0000-86-00-0", "80Gi", "7"),
                capacity: vec![],
                allow_multiple_allocations: false,
            },
        ]
    );

    // floor(7 / slices) partitions per profile and GPU: 7 + 3 + 2.
    let ids: Vec<&str> = layout.partitions.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids.len(), 24);
    assert_eq!(
        &ids[..12],
        [
            "gpu-0000-3b-00-0-1g-10gb-0",
            "gpu-0000-3b-00-0-1g-10gb-1",
            "gpu-0000-3b-00-0-1g-10gb-2",
            "gpu-0000-3b-00-0-1g-10gb-3",
            "gpu-0000-3b-00-0-1g-10gb-4",
            "gpu-0000-3b-00-0-1g-10gb-5",
            "gpu-0000-3b-00-0-1g-10gb-6",
            "gpu-0000-3b-00-0-2g-20gb-0",
            "gpu-0000-3b-00-0-2g-20gb-1",
            "gpu-0000-3b-00-0-2g-20gb-2",
            "gpu-0000-3b-00-0-3g-40gb-0",
            "gpu-0000-3b-00-0-3g-40gb-1",
        ]
    );
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len());
    assert!(ids.iter().all(|id| id.len() <= 63));

    let last = layout.partitions.last().unwrap();
    assert_eq!(last.id, "gpu-0000-86-00-0-3g-40gb-1");
    assert_eq!(last.parent, GPU_B);
    assert_eq!(
        last.attributes,
        pairs(&[("profile", "3g.40gb"), ("memory", "40Gi")])
    );
    assert_eq!(
        last.consumes_counters,
        takes("gpu-0000-86-00-0", "40Gi", "3")
    );
    assert!(last.capacity.is_empty());
    assert!(
        layout.partitions[..12]
            .iter()
            .all(|p| p.parent == GPU_A && p.consumes_counters[0].counter_set == "gpu-0000-3b-00-0"),
        "{layout:?}"
    );
}

#[test]
fn the_layout_follows_the_guest_config_and_refuses_bad_profiles() {
    let guest = load(artifacts::GPU_PARTITIONS);
    let config = [
        ("memory", "48Gi"),
        ("slices", "4"),
        ("profiles", "small=1:12Gi, Half_GPU=2:24Gi"),
    ];
    let layout = guest.describe_layout(&ctx(&config), &[gpu(GPU_A)]).unwrap();
    assert_eq!(layout.counter_sets[0].counters, counters("48Gi", "4"));
    let ids: Vec<&str> = layout.partitions.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "gpu-0000-3b-00-0-small-0",
            "gpu-0000-3b-00-0-small-1",
            "gpu-0000-3b-00-0-small-2",
            "gpu-0000-3b-00-0-small-3",
            "gpu-0000-3b-00-0-half-gpu-0",
            "gpu-0000-3b-00-0-half-gpu-1",
        ]
    );
    assert_eq!(
        layout.partitions[5].consumes_counters,
        takes("gpu-0000-3b-00-0", "24Gi", "2")
    );

    let error = guest
        .describe_layout(&ctx(&[("profiles", "1g.10gb=one:10Gi")]), &[gpu(GPU_A)])
        .unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert_eq!(error.hook(), Hook::DraLayout);
    let message = error.to_string();
    assert!(message.contains("gpu_partitions.wasm"), "{message}");
    assert!(message.contains("hook dra-layout"), "{message}");
    assert!(message.contains("1g.10gb=one:10Gi"), "{message}");
}

#[test]
fn prepare_creates_partitions_and_reports_each_device_ready() {
    let guest = load(artifacts::GPU_PARTITIONS);
    let gpus = PartitioningGpus::new(None);
    let mut admin = whole(GPU_B);
    admin.admin_access = true;
    let devices = [partition("gpu-0000-3b-00-0-1g-10gb-0", GPU_A), admin];
    let statuses = guest
        .dra_prepare(&dra_ctx(&gpus, &[], EVEN_UID, &devices), &devices)
        .unwrap();

    assert_eq!(
        gpus.writes(),
        [(
            GPU_A.to_string(),
            "partition_create".to_string(),
            "gpu-0000-3b-00-0-1g-10gb-0".to_string()
        )]
    );
    assert_eq!(statuses.len(), 2);
    assert_eq!(statuses[0].id, "gpu-0000-3b-00-0-1g-10gb-0");
    assert_eq!(
        statuses[0].conditions,
        [DeviceCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: "PartitionCreated".into(),
            message: format!("created on GPU {GPU_A}"),
        }]
    );
    assert_eq!(
        statuses[0].data.as_deref(),
        Some(r#"{"profile":"1g.10gb","memory":"10Gi"}"#)
    );
    assert_eq!(statuses[0].network, None);
    assert_eq!(statuses[1].id, GPU_B);
    assert_eq!(statuses[1].conditions[0].reason, "DeviceReady");
    assert_eq!(statuses[1].conditions[0].status, "True");
    assert_eq!(statuses[1].data.as_deref(), Some(r#"{"adminAccess":true}"#));

    // Unprepare removes it; a second unprepare finds nothing and succeeds.
    let unprepare = dra_ctx(&gpus, &[], EVEN_UID, &devices);
    guest.dra_unprepare(&unprepare, &devices).unwrap();
    assert_eq!(gpus.existing(), []);
    assert_eq!(
        gpus.writes().last().unwrap(),
        &(
            GPU_A.to_string(),
            "partition_remove".to_string(),
            "-gpu-0000-3b-00-0-1g-10gb-0".to_string()
        )
    );
    guest.dra_unprepare(&unprepare, &devices).unwrap();
}

#[test]
fn prepare_and_unprepare_use_the_configured_attributes() {
    let guest = load(artifacts::GPU_PARTITIONS);
    let gpus = PartitioningGpus::new(None);
    let devices = [partition("gpu-0000-86-00-0-2g-20gb-2", GPU_B)];
    let config = [
        ("create-attribute", "mig_create"),
        ("remove-attribute", "mig_remove"),
    ];
    // The fake driver grants neither: the error names the partition, the
    // GPU and the driver's refusal.
    let error = guest
        .dra_prepare(&dra_ctx(&gpus, &config, EVEN_UID, &devices), &devices)
        .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("gpu-0000-86-00-0-2g-20gb-2"), "{message}");
    assert!(
        message.contains(&format!("writing mig_create of {GPU_B} is not granted")),
        "{message}"
    );
    // Not an absent partition: the unprepare fails too, to be retried.
    let error = guest
        .dra_unprepare(&dra_ctx(&gpus, &config, EVEN_UID, &devices), &devices)
        .unwrap_err();
    assert_eq!(error.hook(), Hook::DraUnprepare);
    assert!(error.to_string().contains("mig_remove"), "{error}");
    assert_eq!(
        gpus.writes(),
        [
            (
                GPU_B.into(),
                "mig_create".into(),
                "gpu-0000-86-00-0-2g-20gb-2".into()
            ),
            (
                GPU_B.into(),
                "mig_remove".into(),
                "-gpu-0000-86-00-0-2g-20gb-2".into()
            ),
        ]
    );
}

#[test]
fn a_failed_create_is_a_call_error_naming_guest_hook_and_partition_and_unprepare_undoes_the_rest() {
    let guest = load(artifacts::GPU_PARTITIONS);
    let gpus = PartitioningGpus::new(Some("gpu-0000-3b-00-0-3g-40gb-1"));
    let devices = [
        partition("gpu-0000-3b-00-0-3g-40gb-0", GPU_A),
        partition("gpu-0000-3b-00-0-3g-40gb-1", GPU_A),
    ];
    let context = dra_ctx(&gpus, &[], EVEN_UID, &devices);
    let error = guest.dra_prepare(&context, &devices).unwrap_err();
    assert_eq!(error.kind(), CallErrorKind::GuestError);
    assert_eq!(error.hook(), Hook::DraPrepare);
    assert_eq!(error.guest(), "gpu_partitions.wasm");
    let message = error.to_string();
    assert!(
        message.starts_with("guest \"gpu_partitions.wasm\" hook dra-prepare returned an error"),
        "{message}"
    );
    assert!(message.contains("gpu-0000-3b-00-0-3g-40gb-1"), "{message}");
    assert!(message.contains("No space left on device"), "{message}");
    assert_eq!(
        gpus.existing(),
        [(GPU_A.to_string(), "gpu-0000-3b-00-0-3g-40gb-0".to_string())]
    );

    // The host unwinds with the same devices: what exists goes, the
    // partition that never came to be is no error.
    guest.dra_unprepare(&context, &devices).unwrap();
    assert_eq!(gpus.existing(), []);
}

#[test]
fn fail_create_half_fails_the_claims_whose_uid_bytes_sum_to_an_odd_number() {
    let sum = |uid: &str| uid.bytes().map(u32::from).sum::<u32>();
    assert_eq!(sum(EVEN_UID) % 2, 0);
    assert_eq!(sum(ODD_UID) % 2, 1);

    let guest = load(artifacts::GPU_PARTITIONS);
    let gpus = PartitioningGpus::new(None);
    let devices = [partition("gpu-0000-86-00-0-1g-10gb-4", GPU_B)];
    let config = [("fail-create", "half")];
    for _ in 0..2 {
        let error = guest
            .dra_prepare(&dra_ctx(&gpus, &config, ODD_UID, &devices), &devices)
            .unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::GuestError);
        assert!(
            error.to_string().contains("gpu-0000-86-00-0-1g-10gb-4"),
            "{error}"
        );
    }
    // Failed on purpose: the driver was never asked.
    assert_eq!(gpus.writes(), []);
    let statuses = guest
        .dra_prepare(&dra_ctx(&gpus, &config, EVEN_UID, &devices), &devices)
        .unwrap();
    assert_eq!(statuses[0].conditions[0].reason, "PartitionCreated");
    assert_eq!(
        gpus.existing(),
        [(GPU_B.to_string(), "gpu-0000-86-00-0-1g-10gb-4".to_string())]
    );
}

#[test]
fn claim_devices_reach_the_guest_and_are_empty_without_a_claim() {
    let guest = load(artifacts::CLAIM_ECHO);
    let mut shared = partition("gpu-0000-3b-00-0-2g-20gb-1", GPU_A);
    shared.request = "gpus/large".into();
    shared.consumed_capacity = pairs(&[("memory", "10Gi"), ("cores", "2")]);
    shared.share_id = Some("7c6b3b1e".into());
    let mut admin = whole(GPU_B);
    admin.admin_access = true;
    let devices = vec![device_ref("gpu0", 0, &[])];

    let context = ctx(&[]).with_claim(claim_with(EVEN_UID, vec![shared, admin]));
    let response = guest
        .allocate(&context, &devices, &ContainerResponse::default())
        .unwrap();
    let env = |key: &str| {
        response
            .envs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(env("WDP_CLAIM_DEVICES").as_deref(), Some("2"));
    assert_eq!(
        env("WDP_CLAIM_DEVICE_0").as_deref(),
        Some(
            "gpu-0000-3b-00-0-2g-20gb-1 device=0000:3b:00.0 request=gpus/large partition=true \
             admin=false consumed=memory=10Gi;cores=2 share=7c6b3b1e"
        )
    );
    assert_eq!(
        env("WDP_CLAIM_DEVICE_1").as_deref(),
        Some(
            "0000:86:00.0 device=0000:86:00.0 request=gpu partition=false admin=true \
             consumed= share=-"
        )
    );

    let response = guest
        .allocate(&ctx(&[]), &devices, &ContainerResponse::default())
        .unwrap();
    assert!(
        response
            .envs
            .contains(&("WDP_CLAIM_DEVICES".to_string(), "0".to_string())),
        "{response:?}"
    );
}

#[test]
fn guests_of_wit_0_1_0_and_0_1_1_load_beside_the_dra_hooks_and_lack_them() {
    for (path, hooks) in [
        (artifacts::COMPAT_OLDER_PATCH, [Hook::Health]),
        (artifacts::COMPAT_PREVIOUS_PATCH, [Hook::Allocate]),
    ] {
        let guest = load(path);
        assert_eq!(guest.hooks(), hooks);
        guest.smoke_test(&ctx(&[])).unwrap();
        let error = guest.describe_layout(&ctx(&[]), &[gpu(GPU_A)]).unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::NotExported, "{error}");
        assert_eq!(error.hook(), Hook::DraLayout);
        let error = guest.dra_prepare(&ctx(&[]), &[whole(GPU_A)]).unwrap_err();
        assert_eq!(error.kind(), CallErrorKind::NotExported, "{error}");
    }
}
