//! Device taints decided by a guest at the API server's limits (WIT 0.1.3,
//! `device-taints-v2`): the example guest `vfio-guard` on the 8-GPU
//! fixture, served in-process against the fake API server at 1.34, 1.35
//! and 1.37, which refuses any slice the real one of that version would
//! refuse (16 taints a device and the effect `None` from 1.35 on, 4 and no
//! `None` on 1.34). Also: a guest built against WIT 0.1.2 still taints
//! through `device-taints` under this host.

use std::collections::BTreeMap;

use crate::common::WAIT;
use crate::common::dra_world::*;
use k8s_openapi::api::resource::v1::{DeviceTaint, ResourceSlice};

/// The fixture's GPUs with the taints guest `guest` bound, `config` as its
/// `[guest-config]`.
async fn taints_world(minor: u32, guest: &str, config: &str) -> DraWorld {
    let w = DraWorld::new(&format!(
        "[hooks.device-taints]\nguest = \"guests/taints.wasm\"\n[guest-config]\n{config}"
    ))
    .await;
    w.world.install_guest(guest, "taints.wasm");
    w.api.set_served_minor(minor);
    w
}

/// Every device's taints, by device name.
fn taints_of(slices: &[ResourceSlice]) -> BTreeMap<String, Vec<DeviceTaint>> {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| (d.name.clone(), d.taints.clone().unwrap_or_default()))
        .collect()
}

fn key(name: &str) -> String {
    format!("{DRIVER}/{name}")
}

/// 15 guest taints, every one informational: the `degraded` taint (every
/// GPU reports a vendor, read here as what it degrades by) and 14 notes.
const FIFTEEN_NONE: &str = "degraded-attribute = \"pci.vendor\"\nnotes = 14\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_1_35_a_device_carries_sixteen_taints_with_the_none_effect() {
    for minor in [35, 37] {
        let w = taints_world(minor, wdp_guest_artifacts::VFIO_GUARD, FIFTEEN_NONE).await;
        let (host, _endpoint) = w.serving().await;
        let published = taints_of(&w.api.slices_of(NODE, DRIVER));
        assert_eq!(published.len(), 8, "1.{minor}");
        let gpu_a = &published[&name_of(GPU_A)];
        assert_eq!(gpu_a.len(), 15, "1.{minor}: {gpu_a:?}");
        assert_eq!(gpu_a[0].key, key("degraded"));
        assert_eq!(gpu_a[0].value.as_deref(), Some("0x10de"));
        assert_eq!(gpu_a[14].key, key("note-14"));
        assert!(
            gpu_a.iter().all(|t| t.effect == "None"),
            "1.{minor}: {gpu_a:?}"
        );
        assert!(gpu_a.iter().all(|t| t.time_added.is_some()));

        // A GPU unplugged: its health taint makes 16, the limit; the
        // other GPUs' taints hold, each keeping its time.
        let gone = "0000:07:00.0";
        std::fs::remove_file(w.world.root().join("sys/bus/pci/devices").join(gone)).unwrap();
        let unhealthy = key("unhealthy");
        w.api
            .wait_for_slices(
                |slices| {
                    let slices: Vec<ResourceSlice> = slices
                        .iter()
                        .filter(|s| s.spec.driver == DRIVER)
                        .cloned()
                        .collect();
                    taints_of(&slices)
                        .get(&name_of(gone))
                        .is_some_and(|t| t.iter().any(|t| t.key == unhealthy))
                },
                WAIT,
            )
            .await
            .unwrap();
        let after = taints_of(&w.api.slices_of(NODE, DRIVER));
        let gone_taints = &after[&name_of(gone)];
        assert_eq!(gone_taints.len(), 16, "1.{minor}: {gone_taints:?}");
        assert_eq!(gone_taints[15].effect, "NoSchedule");
        assert_eq!(
            &after[&name_of(GPU_A)],
            gpu_a,
            "1.{minor}: the taints that hold keep their timeAdded"
        );
        assert!(
            w.api.stats().rejected.is_empty(),
            "1.{minor}: {:?}",
            w.api.stats().rejected
        );
        host.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_34_none_taints_are_left_out_and_the_rest_published() {
    let config =
        "degraded-attribute = \"pci.vendor\"\ndegraded-effect = \"no-schedule\"\nnotes = 2\n";
    let w = taints_world(34, wdp_guest_artifacts::VFIO_GUARD, config).await;
    let (host, _endpoint) = w.serving().await;
    let want = |taints: &[DeviceTaint]| {
        taints.len() == 1 && taints[0].key == key("degraded") && taints[0].effect == "NoSchedule"
    };
    // The first pass may go before the host knows the server's version;
    // then the fitted taints follow.
    w.api
        .wait_for_slices(
            |slices| {
                let slices: Vec<ResourceSlice> = slices
                    .iter()
                    .filter(|s| s.spec.driver == DRIVER)
                    .cloned()
                    .collect();
                let all = taints_of(&slices);
                all.len() == 8 && all.values().all(|t| want(t))
            },
            WAIT,
        )
        .await
        .unwrap();
    assert!(
        w.api.stats().rejected.is_empty(),
        "{:?}",
        w.api.stats().rejected
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_1_34_a_device_given_more_taints_than_fit_keeps_no_guest_taint() {
    // 5 scheduling taints: more than the 3 a 1.34 server takes beside
    // the health taint. No earlier answer fitted, so none is kept.
    let config = "degraded-attribute = \"pci.vendor\"\ndegraded-effect = \"no-schedule\"\nnotes = 4\nnotes-effect = \"no-schedule\"\n";
    let w = taints_world(34, wdp_guest_artifacts::VFIO_GUARD, config).await;
    let (host, _endpoint) = w.serving().await;
    let published = taints_of(&w.api.slices_of(NODE, DRIVER));
    assert_eq!(published.len(), 8);
    assert!(
        published.values().all(Vec::is_empty),
        "the guest's answer is refused device by device: {published:?}"
    );
    assert!(
        w.api.stats().rejected.is_empty(),
        "{:?}",
        w.api.stats().rejected
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guest_built_against_0_1_2_still_taints_through_device_taints() {
    for minor in [34, 37] {
        let w = taints_world(
            minor,
            wdp_guest_artifacts::COMPAT_TAINTS_0_1_2,
            "note = \"kept\"\n",
        )
        .await;
        let (host, _endpoint) = w.serving().await;
        let published = taints_of(&w.api.slices_of(NODE, DRIVER));
        let gpu_a = &published[&name_of(GPU_A)];
        assert_eq!(gpu_a.len(), 1, "1.{minor}: {gpu_a:?}");
        assert_eq!(gpu_a[0].key, key("legacy"));
        assert_eq!(gpu_a[0].value.as_deref(), Some("kept"));
        assert_eq!(gpu_a[0].effect, "NoSchedule");
        host.shutdown().await;
    }
}
