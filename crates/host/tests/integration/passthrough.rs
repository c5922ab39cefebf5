//! Passthrough bound on demand, end to end in-process: the 8-GPU fixture
//! served as a DRA resource with `[passthrough] bind-driver = "vfio-pci"`,
//! the kernel's sysfs binding played by the kernel stand-in, the API server
//! by the fake one, the kubelet by gRPC calls. What an operator sees: the
//! slices name the binding condition; an allocated claim's GPU moves to
//! vfio-pci (its whole IOMMU group) and the condition turns `True`; the
//! container gets the VFIO nodes; unprepare, or the claim's deletion
//! before any prepare, puts the GPU back on `nvidia`; a refused or failed
//! bind sets the failure condition with the reason and moves nothing; a
//! bind a kill cut short is undone at the next start.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use wdp_dra_driver::{BIND_FAILED_CONDITION, BOUND_CONDITION, journal_path};
use wdp_test_support::eventually;
use wdp_test_support::kernel_standin::KernelStandin;

use crate::common::WAIT;
use crate::common::dra_world::*;

const PASSTHROUGH: &str = "[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 3000\n";

/// GPU A's IOMMU group in the fixture.
const GROUP_A: &str = "13";

/// A claim allocated `devices`, each result waiting on the binding
/// condition as the scheduler copies it from the slice.
fn waiting_claim(name: &str, devices: &[&str]) -> ResourceClaim {
    let mut claim = claim(name, DRIVER, devices);
    for result in claim
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .map(|a| a.devices.as_mut().unwrap().results.as_mut().unwrap())
        .into_iter()
        .flatten()
    {
        result.binding_conditions = Some(vec![BOUND_CONDITION.to_owned()]);
        result.binding_failure_conditions = Some(vec![BIND_FAILED_CONDITION.to_owned()]);
    }
    claim
}

/// The condition `type_` of `device` in the stored claim, as
/// `(status, message)`.
fn condition(w: &DraWorld, name: &str, device: &str, type_: &str) -> Option<(String, String)> {
    let claim = w.api.claim("default", name)?;
    claim
        .status?
        .devices?
        .into_iter()
        .filter(|d| d.device == device)
        .flat_map(|d| d.conditions.unwrap_or_default())
        .find(|c| c.type_ == type_)
        .map(|c| (c.status, c.message))
}

async fn wait_condition(w: &DraWorld, name: &str, device: &str, type_: &str) -> String {
    eventually(WAIT, Duration::from_millis(20), async || {
        match condition(w, name, device, type_) {
            Some((status, message)) if status == "True" => Ok(message),
            other => Err(format!("{type_} of {device} in claim {name}: {other:?}")),
        }
    })
    .await
}

fn vfio_node(w: &DraWorld, group: &str) -> std::path::PathBuf {
    w.world.root().join("dev/vfio").join(group)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_allocated_claim_gets_its_group_bound_then_its_vfio_nodes_then_its_driver_back() {
    let w = DraWorld::new(PASSTHROUGH).await;
    let kernel = KernelStandin::start(&w.world.root());
    let (host, endpoint) = w.serving().await;

    // Every device names the condition the scheduler waits for.
    for slice in w.api.slices_of(NODE, DRIVER) {
        for device in slice.spec.devices.unwrap_or_default() {
            assert_eq!(
                device.binding_conditions.as_deref(),
                Some(&[BOUND_CONDITION.to_owned()][..]),
                "{}",
                device.name
            );
            assert_eq!(
                device.binding_failure_conditions.as_deref(),
                Some(&[BIND_FAILED_CONDITION.to_owned()][..])
            );
        }
    }
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));

    let gpu_a = name_of(GPU_A);
    let stored = w.api.put_claim(waiting_claim("vm-a", &[&gpu_a]));
    let message = wait_condition(&w, "vm-a", &gpu_a, BOUND_CONDITION).await;
    assert!(message.contains(GROUP_A), "{message}");
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    assert!(vfio_node(&w, GROUP_A).exists());
    // GPU B, on its own group, is untouched.
    assert_eq!(kernel.driver(GPU_B).as_deref(), Some("nvidia"));

    let answer = prepare_one(&endpoint, &stored).await;
    assert!(answer.error.is_empty(), "{}", answer.error);
    let spec = read_cdi_spec(&spec_of(&w, &stored));
    let nodes: Vec<String> = spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| {
            d["containerEdits"]["deviceNodes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .chain(
            spec["containerEdits"]["deviceNodes"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        )
        .map(|n| n["path"].as_str().unwrap().to_owned())
        .collect();
    assert!(nodes.contains(&format!("/dev/vfio/{GROUP_A}")), "{nodes:?}");
    assert!(nodes.contains(&"/dev/vfio/vfio".to_owned()), "{nodes:?}");
    assert!(
        !nodes.iter().any(|n| n.starts_with("/dev/nvidia0")),
        "{nodes:?}"
    );

    let error = unprepare_one(&endpoint, &stored).await;
    assert!(error.is_empty(), "{error}");
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));
    assert!(!vfio_node(&w, GROUP_A).exists());

    // One bind and one restore, counted; the failure series at zero.
    let metrics = host.metrics().encode();
    for (operation, result, count) in [
        ("bind", "success", 1),
        ("restore", "success", 1),
        ("restore", "failure", 0),
    ] {
        let series = format!(
            "wasm_device_plugin_dra_passthrough_operations_total{{driver=\"{DRIVER}\",operation=\"{operation}\",result=\"{result}\"}} {count}"
        );
        assert!(metrics.contains(&series), "{series}\n{metrics}");
    }
}

/// A virtual machine asking for several GPUs waits for the slowest bind,
/// not for their sum: with the kernel holding every probe, all three GPUs
/// of the claim reach their probe before any bind ends. Bound one after
/// another, the second would not start before the first's 60 s deadline.
#[tokio::test(flavor = "multi_thread")]
async fn a_claim_of_several_gpus_has_their_groups_bound_side_by_side() {
    let w =
        DraWorld::new("[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 60000\n").await;
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, _endpoint) = w.serving().await;
    const GPU_C: &str = "0000:07:00.0";
    let gpus = [GPU_A, GPU_B, GPU_C];
    kernel.hold_probes();

    let names: Vec<String> = gpus.iter().map(|gpu| name_of(gpu)).collect();
    let devices: Vec<&str> = names.iter().map(String::as_str).collect();
    w.api.put_claim(waiting_claim("vm-3", &devices));
    let all_waiting = tokio::task::block_in_place(|| {
        kernel.wait_until(WAIT, |k| {
            let held = k.held_probes();
            gpus.iter().all(|gpu| held.iter().any(|h| h == gpu))
        })
    });
    assert!(all_waiting, "probes held: {:?}", kernel.held_probes());

    kernel.release_probes();
    for name in &names {
        let message = wait_condition(&w, "vm-3", name, BOUND_CONDITION).await;
        assert!(message.contains(GROUP_A), "{message}");
    }
    for gpu in gpus {
        assert_eq!(kernel.driver(gpu).as_deref(), Some("vfio-pci"), "{gpu}");
    }
}

/// Virtual machines scheduled together do not wait for each other's
/// binds: with the kernel holding every probe, the GPUs of two claims
/// both reach their probe before either bind ends.
#[tokio::test(flavor = "multi_thread")]
async fn claims_allocated_together_are_bound_side_by_side() {
    let w =
        DraWorld::new("[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 60000\n").await;
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, _endpoint) = w.serving().await;
    kernel.hold_probes();

    let (gpu_a, gpu_b) = (name_of(GPU_A), name_of(GPU_B));
    w.api.put_claim(waiting_claim("vm-a", &[&gpu_a]));
    w.api.put_claim(waiting_claim("vm-b", &[&gpu_b]));
    let both_waiting = tokio::task::block_in_place(|| {
        kernel.wait_until(WAIT, |k| {
            let held = k.held_probes();
            [GPU_A, GPU_B]
                .iter()
                .all(|gpu| held.iter().any(|h| h == gpu))
        })
    });
    assert!(both_waiting, "probes held: {:?}", kernel.held_probes());

    kernel.release_probes();
    wait_condition(&w, "vm-a", &gpu_a, BOUND_CONDITION).await;
    wait_condition(&w, "vm-b", &gpu_b, BOUND_CONDITION).await;
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    assert_eq!(kernel.driver(GPU_B).as_deref(), Some("vfio-pci"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_or_failed_bind_sets_the_failure_condition_and_moves_nothing() {
    let w = DraWorld::new(PASSTHROUGH).await;
    // GPU B is the boot display: the host never binds it.
    w.world
        .write_host(&format!("/sys/bus/pci/devices/{GPU_B}/boot_vga"), "1\n");
    let kernel = KernelStandin::start(&w.world.root());
    // GPU C's driver never lets go.
    const GPU_C: &str = "0000:07:00.0";
    kernel.never_lets_go(GPU_C);
    let (_host, _endpoint) = w.serving().await;

    let gpu_b = name_of(GPU_B);
    w.api.put_claim(waiting_claim("vm-b", &[&gpu_b]));
    let message = wait_condition(&w, "vm-b", &gpu_b, BIND_FAILED_CONDITION).await;
    assert!(message.contains("boot display"), "{message}");
    assert!(message.contains(GPU_B), "{message}");
    assert_eq!(kernel.driver(GPU_B).as_deref(), Some("nvidia"));

    let gpu_c = name_of(GPU_C);
    w.api.put_claim(waiting_claim("vm-c", &[&gpu_c]));
    let message = wait_condition(&w, "vm-c", &gpu_c, BIND_FAILED_CONDITION).await;
    assert!(message.contains(GPU_C), "{message}");
    assert_eq!(kernel.driver(GPU_C).as_deref(), Some("nvidia"));
    let (status, _) = condition(&w, "vm-c", &gpu_c, BOUND_CONDITION).unwrap();
    assert_eq!(status, "False");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_deleted_before_its_prepare_gets_its_group_bound_back() {
    let w = DraWorld::new(PASSTHROUGH).await;
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, _endpoint) = w.serving().await;
    let gpu_a = name_of(GPU_A);
    w.api.put_claim(waiting_claim("vm-a", &[&gpu_a]));
    wait_condition(&w, "vm-a", &gpu_a, BOUND_CONDITION).await;
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));

    assert!(w.api.delete_claim("default", "vm-a"));
    assert!(
        kernel.wait_until(WAIT, |k| k.driver(GPU_A).as_deref() == Some("nvidia")),
        "GPU A stayed on {:?}",
        kernel.driver(GPU_A)
    );
    assert!(!vfio_node(&w, GROUP_A).exists());
}

/// A host that bound GPU A for claim `vm-a` (waiting on its condition)
/// and prepared it, then shut down; the world, the kernel and the claim.
async fn prepared_then_stopped() -> (DraWorld, KernelStandin, ResourceClaim) {
    let w = DraWorld::new(PASSTHROUGH).await;
    let kernel = KernelStandin::start(&w.world.root());
    let (host, endpoint) = w.serving().await;
    let gpu_a = name_of(GPU_A);
    let stored = w.api.put_claim(waiting_claim("vm-a", &[&gpu_a]));
    wait_condition(&w, "vm-a", &gpu_a, BOUND_CONDITION).await;
    let answer = prepare_one(&endpoint, &stored).await;
    assert!(answer.error.is_empty(), "{}", answer.error);
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    host.shutdown().await;
    (w, kernel, stored)
}

#[tokio::test(flavor = "multi_thread")]
async fn binds_hold_across_a_restart_and_a_bind_cut_short_is_undone_at_start() {
    let (w, kernel, stored) = prepared_then_stopped().await;

    // While the host is down, a bind of GPU B was cut short by a kill: its
    // journal says Binding, the function is off its driver with the
    // override set (as the host leaves it between unbind and probe).
    let journal = journal_path(&w.options().state_dir, DRIVER);
    let mut recorded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&journal).unwrap()).unwrap();
    let groups = recorded["groups"].as_array_mut().unwrap();
    assert_eq!(groups.len(), 1, "{recorded}");
    let group_b = std::fs::read_link(
        w.world
            .root()
            .join(format!("sys/bus/pci/devices/{GPU_B}/iommu_group")),
    )
    .unwrap()
    .file_name()
    .unwrap()
    .to_string_lossy()
    .into_owned();
    groups.push(serde_json::json!({
        "group": group_b, "claim_uid": "killed-mid-bind", "target": "vfio-pci",
        "phase": "binding",
        "functions": [{"address": GPU_B, "previous_driver": "nvidia"}]
    }));
    std::fs::write(&journal, serde_json::to_vec(&recorded).unwrap()).unwrap();
    kernel.set_driver(GPU_B, None);
    w.world.write_host(
        &format!("/sys/bus/pci/devices/{GPU_B}/driver_override"),
        "vfio-pci\n",
    );

    let (_host, endpoint) = w.serving().await;
    assert!(
        kernel.wait_until(WAIT, |k| k.driver(GPU_B).as_deref() == Some("nvidia")),
        "GPU B stayed on {:?}",
        kernel.driver(GPU_B)
    );
    // The prepared claim's group stayed bound, and its unprepare by the
    // new process puts it back.
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    let error = unprepare_one(&endpoint, &stored).await;
    assert!(error.is_empty(), "{error}");
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));
    let left: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&journal).unwrap()).unwrap();
    assert_eq!(left["groups"], serde_json::json!([]), "{left}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_bind_journal_refuses_binds_naming_it_and_the_host_keeps_serving() {
    let w = DraWorld::new(PASSTHROUGH).await;
    let journal = journal_path(&w.options().state_dir, DRIVER);
    std::fs::create_dir_all(journal.parent().unwrap()).unwrap();
    std::fs::write(&journal, "{\"version\": 1, \"groups\": [{\"group\": ").unwrap();
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, endpoint) = w.serving().await;

    let gpu_a = name_of(GPU_A);
    let stored = w.api.put_claim(waiting_claim("vm-a", &[&gpu_a]));
    let message = wait_condition(&w, "vm-a", &gpu_a, BIND_FAILED_CONDITION).await;
    assert!(
        message.contains(&journal.display().to_string()),
        "{message}"
    );
    assert!(message.contains("damaged"), "{message}");
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));
    // The file is left as it was, for the operator to look at.
    assert!(
        std::fs::read_to_string(&journal)
            .unwrap()
            .ends_with("\"group\": ")
    );
    // Prepare says the same, naming the claim; the driver keeps serving.
    let answer = prepare_one(&endpoint, &stored).await;
    assert!(answer.error.contains("vm-a"), "{}", answer.error);
    assert!(answer.error.contains("damaged"), "{}", answer.error);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_journal_removed_or_damaged_while_stopped_still_gives_a_prepared_claims_gpu_back() {
    for (how, damage) in [
        ("removed", None),
        ("damaged", Some("{\"version\": 1, \"groups\": [")),
    ] {
        let (w, kernel, stored) = prepared_then_stopped().await;

        let journal = journal_path(&w.options().state_dir, DRIVER);
        match damage {
            None => std::fs::remove_file(&journal).unwrap(),
            Some(text) => std::fs::write(&journal, text).unwrap(),
        }
        let (_host, endpoint) = w.serving().await;
        // The kubelet asks again after the restart: the recorded answer,
        // the group still bound.
        let answer = prepare_one(&endpoint, &stored).await;
        assert!(answer.error.is_empty(), "{how}: {}", answer.error);
        assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"), "{how}");
        // Unprepare binds it back from the checkpoint's copy.
        let error = unprepare_one(&endpoint, &stored).await;
        assert!(error.is_empty(), "{how}: {error}");
        assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"), "{how}");
        assert!(!vfio_node(&w, GROUP_A).exists(), "{how}");
    }
}
