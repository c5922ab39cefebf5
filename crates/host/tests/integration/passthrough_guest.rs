//! The `passthrough` hook (WIT 0.1.3) end to end in-process: the 8-GPU
//! fixture as a DRA resource with `[passthrough] bind-driver = "vfio-pci"`
//! and the `vfio-guard` example guest bound to `[hooks.passthrough]`, the
//! kernel played by the kernel stand-in. What an operator sees: a bind the
//! guest accepts is made; one it refuses fails the claim's binding with the
//! guest's reason, naming the guest and the hook, and moves nothing.

use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use wdp_dra_driver::{BIND_FAILED_CONDITION, BOUND_CONDITION};
use wdp_test_support::eventually;
use wdp_test_support::kernel_standin::KernelStandin;

use crate::common::WAIT;
use crate::common::dra_world::*;

/// The resource binds to vfio-pci and asks `vfio-guard` first; `config`
/// is the guest's `[guest-config]`.
async fn guarded_world(config: &str) -> DraWorld {
    let w = DraWorld::new(&format!(
        "[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 3000\n\
         [hooks.passthrough]\nguest = \"guests/guard.wasm\"\n[guest-config]\n{config}"
    ))
    .await;
    w.world
        .install_guest(wdp_guest_artifacts::VFIO_GUARD, "guard.wasm");
    w
}

/// A claim allocated `device`, its result waiting on the binding
/// conditions as the scheduler copies them from the slice.
fn waiting_claim(name: &str, device: &str) -> ResourceClaim {
    let mut claim = claim(name, DRIVER, &[device]);
    for result in claim
        .status
        .as_mut()
        .and_then(|s| s.allocation.as_mut())
        .and_then(|a| a.devices.as_mut())
        .and_then(|d| d.results.as_mut())
        .into_iter()
        .flatten()
    {
        result.binding_conditions = Some(vec![BOUND_CONDITION.to_owned()]);
        result.binding_failure_conditions = Some(vec![BIND_FAILED_CONDITION.to_owned()]);
    }
    claim
}

/// Waits for the condition `type_` of `device` in claim `name` to be
/// `True`; its message.
async fn wait_condition(w: &DraWorld, name: &str, device: &str, type_: &str) -> String {
    eventually(WAIT, Duration::from_millis(20), async || {
        let condition = w
            .api
            .claim("default", name)
            .and_then(|c| c.status)
            .and_then(|s| s.devices)
            .into_iter()
            .flatten()
            .filter(|d| d.device == device)
            .flat_map(|d| d.conditions.unwrap_or_default())
            .find(|c| c.type_ == type_);
        match condition {
            Some(c) if c.status == "True" => Ok(c.message),
            other => Err(format!("{type_} of {device} in claim {name}: {other:?}")),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_passthrough_guest_lets_a_gpu_through() {
    let w = guarded_world("").await;
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, _endpoint) = w.serving().await;
    let gpu_a = name_of(GPU_A);
    w.api.put_claim(waiting_claim("vm-a", &gpu_a));
    wait_condition(&w, "vm-a", &gpu_a, BOUND_CONDITION).await;
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_passthrough_guest_refuses_a_bind_with_its_reason_and_nothing_moves() {
    // The guest keeps every function bound to nvidia: the GPUs themselves.
    let w = guarded_world("refuse-drivers = \"nvidia\"\n").await;
    let kernel = KernelStandin::start(&w.world.root());
    let (_host, _endpoint) = w.serving().await;
    let gpu_a = name_of(GPU_A);
    w.api.put_claim(waiting_claim("vm-a", &gpu_a));
    let message = wait_condition(&w, "vm-a", &gpu_a, BIND_FAILED_CONDITION).await;
    for words in [
        "guard.wasm",
        "passthrough",
        GPU_A,
        "is bound to nvidia, which vfio-guard keeps",
    ] {
        assert!(message.contains(words), "{words:?} not in {message}");
    }
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("nvidia"));
}
