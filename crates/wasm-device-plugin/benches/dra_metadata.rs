//! What device metadata (KEP-5304) adds to a prepare, on the real binary:
//! `cargo bench -p wasm-device-plugin --bench dra_metadata`.
//!
//! One host serves two DRA resources side by side, alike but for
//! `device-metadata`: `meta.bench.example.com` (on, the default) on
//! loop4–loop5 and `plain.bench.example.com` (`device-metadata = false`)
//! on loop6–loop7, beside the shipped configuration's four device-plugin
//! resources, the CDI folder on tmpfs as a node's `/var/run/cdi` is, the
//! state and kubelet-plugins folders (where the metadata files go) on
//! disk. Claims alternate between the two drivers, one at a time, so both
//! see the same machine at the same moments: `WDP_BENCH_CLAIMS` claims
//! each (default 300), each created, prepared (the `NodePrepareResources`
//! round trip is timed), unprepared and deleted. Printed: p50, p90 and p99
//! of each and the difference.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim,
    ResourceClaimStatus, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use support::{Layout, SHIPPED_RESOURCES, ms, percentile};
use wdp_fake_apiserver::FakeApiServer;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet, SimKubelet};

const NODE: &str = "bench-node";
const WAIT: Duration = Duration::from_secs(30);

/// One of the two resources.
struct Side {
    driver: &'static str,
    resource: &'static str,
    nodes: &'static str,
    metadata: bool,
}

const SIDES: [Side; 2] = [
    Side {
        driver: "meta.bench.example.com",
        resource: "bench.example.com/loop-meta",
        nodes: "/dev/loop[4-5]",
        metadata: true,
    },
    Side {
        driver: "plain.bench.example.com",
        resource: "bench.example.com/loop-plain",
        nodes: "/dev/loop[6-7]",
        metadata: false,
    },
];

fn resource_file(side: &Side) -> String {
    let switch = if side.metadata {
        String::new()
    } else {
        "device-metadata = false\n".to_owned()
    };
    format!(
        "version = 1\nresource = \"{}\"\napi = \"dra\"\ndriver = \"{}\"\n{switch}\n[[nodes]]\npath = \"{}\"\n",
        side.resource, side.driver, side.nodes
    )
}

fn device_names(slices: &[ResourceSlice], driver: &str) -> Vec<String> {
    slices
        .iter()
        .filter(|s| s.spec.driver == driver && s.spec.node_name.as_deref() == Some(NODE))
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| d.name.clone())
        .collect()
}

fn claim(n: usize, driver: &str, device: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("claim-{n}")),
            namespace: Some("bench".to_owned()),
            ..ObjectMeta::default()
        },
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        request: "loop".to_owned(),
                        driver: driver.to_owned(),
                        pool: NODE.to_owned(),
                        device: device.to_owned(),
                        ..DeviceRequestAllocationResult::default()
                    }]),
                    config: None,
                }),
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        }),
        ..ResourceClaim::default()
    }
}

/// Claim `n` of `side` on `device`: created, prepared (its round trip
/// returned, after checking the metadata mount is answered exactly when
/// the side has it on), unprepared and deleted.
async fn prepare_one(
    api: &FakeApiServer,
    dra: &SimDraKubelet,
    n: usize,
    side: &Side,
    device: &str,
) -> Duration {
    let c = api.put_claim(claim(n, side.driver, device));
    let reference = ClaimRef {
        namespace: "bench".to_owned(),
        uid: c.metadata.uid.clone().unwrap(),
        name: c.metadata.name.clone().unwrap(),
    };
    let outcome = dra
        .prepare(side.driver, std::slice::from_ref(&reference))
        .await
        .unwrap();
    let devices = match outcome.claims.get(&reference.uid) {
        Some(Ok(devices)) if !devices.is_empty() => devices,
        other => panic!("claim {n} not prepared: {other:?}"),
    };
    let mounted = devices
        .iter()
        .flat_map(|d| &d.cdi_device_ids)
        .any(|id| id.contains("_metadata_"));
    assert_eq!(mounted, side.metadata, "claim {n} of {}", side.driver);
    dra.unprepare(side.driver, std::slice::from_ref(&reference))
        .await
        .unwrap();
    api.delete_claim("bench", &format!("claim-{n}"));
    outcome.elapsed
}

#[tokio::main]
async fn main() {
    let claims: usize = std::env::var("WDP_BENCH_CLAIMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    println!(
        "Device metadata on the real binary ({}), {}",
        support::binary(),
        support::host_cpus_heading()
    );
    let layout = Layout::shipped().with_cdi_on_tmpfs();
    for side in &SIDES {
        let file = format!("{}.toml", side.driver.split('.').next().unwrap_or("dra"));
        std::fs::write(layout.config.join(file), resource_file(side)).unwrap();
    }
    let registry = layout.tmp.path().join("plugins_registry");
    std::fs::create_dir_all(&registry).unwrap();
    let api = Arc::new(FakeApiServer::start().await.unwrap());
    let kubeconfig = layout.tmp.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let dra = SimDraKubelet::start(&registry, DraSimOptions::default())
        .await
        .unwrap();
    let kubelet = SimKubelet::start(&layout.plugins).await.unwrap();
    let mut child = layout.run_dra(&registry, &kubeconfig, NODE);
    for r in SHIPPED_RESOURCES {
        kubelet.wait_registered(r, 1, WAIT).await.unwrap();
    }
    let mut names = Vec::new();
    for side in &SIDES {
        dra.wait_registered(side.driver, WAIT).await.unwrap();
        let slices = api
            .wait_for_slices(|s| device_names(s, side.driver).len() == 2, WAIT)
            .await
            .unwrap();
        names.push(device_names(&slices, side.driver));
    }

    // A warm-up claim each, then the claims alternating between the sides.
    for (k, side) in SIDES.iter().enumerate() {
        prepare_one(&api, &dra, k, side, &names[k][0]).await;
    }
    let mut samples: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for n in 0..claims * 2 {
        let k = n % 2;
        let device = &names[k][(n / 2) % names[k].len()];
        let took = prepare_one(&api, &dra, 2 + n, &SIDES[k], device).await;
        samples[k].push(took);
    }

    let mut p50 = [Duration::ZERO; 2];
    for (k, side) in SIDES.iter().enumerate() {
        let s = &mut samples[k];
        p50[k] = percentile(s, 0.5);
        println!(
            "  device metadata {:3} ({}): {claims} claims, NodePrepareResources p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms",
            if side.metadata { "on" } else { "off" },
            side.driver,
            ms(p50[k]),
            ms(percentile(s, 0.9)),
            ms(percentile(s, 0.99)),
        );
    }
    let added = ms(p50[0]) - ms(p50[1]);
    println!("  added by the metadata files at p50: {added:+.3} ms");
    let _ = child.kill().await;
}
