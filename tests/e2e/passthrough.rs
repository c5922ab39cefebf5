//! Passthrough bound on demand, through the real binary: the host killed
//! (SIGKILL) between unbinding a GPU from `nvidia` and probing it onto
//! vfio-pci. Its next start undoes the half-done bind from the journal (the
//! GPU goes back to `nvidia`), then, the claim still waiting on its binding
//! condition, binds it again and finishes: `PassthroughBound` is written
//! and the GPU is on vfio-pci. The kernel's side is the kernel stand-in on
//! a gpu-server fixture, its probes held to stop the first bind half way.

use std::time::Duration;

use wdp_fake_apiserver::ResourceClaim;
use wdp_test_support::kernel_standin::KernelStandin;

use crate::dra::{Dra, NODE};
use crate::support::{Plugin, World, name_of};
use wdp_test_support::eventually;

const DRIVER: &str = "gpu-vm.e2e.example.com";
const GPU_A: &str = "0000:03:00.0";
const LONG: Duration = Duration::from_secs(30);

const RESOURCE: &str = "version = 1\nresource = \"e2e.example.com/gpu-vm\"\napi = \"dra\"\ndriver = \"gpu-vm.e2e.example.com\"\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 60000\n";

/// A claim allocated GPU A, waiting on its binding condition.
fn waiting_claim() -> ResourceClaim {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "vm", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-vm"}}]}},
        "status": {"allocation": {"devices": {"results": [{
            "request": "gpu", "driver": DRIVER, "pool": NODE, "device": name_of(GPU_A),
            "bindingConditions": ["PassthroughBound"],
            "bindingFailureConditions": ["PassthroughBindFailed"],
        }]}}}
    }))
    .unwrap()
}

fn bound_condition(dra: &Dra) -> Option<String> {
    dra.api
        .claim("default", "vm")?
        .status?
        .devices?
        .into_iter()
        .flat_map(|d| d.conditions.unwrap_or_default())
        .find(|c| c.type_ == "PassthroughBound")
        .map(|c| c.status)
}

fn kill(plugin: &mut Plugin) {
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &plugin.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_killed_mid_bind_undoes_it_at_its_next_start_then_finishes_it() {
    let dra = Dra::in_world(
        World::from_fixture("gpu-server"),
        &[("gpu-vm.toml", RESOURCE)],
    )
    .await;
    let kernel = KernelStandin::start(&dra.world.root());
    kernel.hold_probes();
    let mut plugin = dra.spawn(&[]);
    dra.api
        .wait_for_slices(
            |slices| {
                slices
                    .iter()
                    .filter(|s| s.spec.driver == DRIVER)
                    .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                    .sum::<usize>()
                    == 8
            },
            LONG,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", plugin.log()));

    dra.api.put_claim(waiting_claim());
    assert!(
        kernel.wait_until(LONG, |k| k.held_probes() == [GPU_A]),
        "no probe of GPU A: {:?}\n{}",
        kernel.writes(),
        plugin.log()
    );
    // Unbound from nvidia, the override set, the probe not done: killed.
    assert_eq!(kernel.driver(GPU_A), None);
    kill(&mut plugin);
    plugin.wait(LONG).await.expect("no exit after SIGKILL");
    kernel.discard_held_probes();
    let journal = dra
        .world
        .tmp
        .path()
        .join(format!("state/dra/{DRIVER}.binds.json"));
    let recorded = std::fs::read_to_string(&journal).unwrap();
    assert!(recorded.contains("\"binding\""), "{recorded}");
    assert_eq!(bound_condition(&dra), None);

    let writes_before = kernel.writes().len();
    let plugin = dra.spawn(&[]);
    // The half-done bind is undone first: GPU A goes back to nvidia ...
    assert!(
        kernel.wait_until(LONG, |k| k.writes()[writes_before..].iter().any(
            |(path, value)| path.ends_with("drivers/nvidia/bind") && value == GPU_A
        )),
        "GPU A was not bound back to nvidia: {:?}\n{}",
        &kernel.writes()[writes_before..],
        plugin.log()
    );
    // ... then, the claim still waiting, bound again, which finishes once
    // the kernel probes it.
    assert!(
        kernel.wait_until(LONG, |k| k.held_probes() == [GPU_A]),
        "GPU A was not bound again: {:?}\n{}",
        &kernel.writes()[writes_before..],
        plugin.log()
    );
    kernel.release_probes();
    eventually(
        LONG,
        Duration::from_millis(50),
        async || match bound_condition(&dra) {
            Some(status) if status == "True" => Ok(()),
            other => Err(format!("PassthroughBound {other:?}\n{}", plugin.log())),
        },
    )
    .await;
    assert_eq!(kernel.driver(GPU_A).as_deref(), Some("vfio-pci"));
    assert!(
        plugin
            .log()
            .contains("a bind cut short by the last stop was undone"),
        "{}",
        plugin.log()
    );
}
