//! The DRA half of `demo`: an in-process API server (the fake the tests
//! use, spoken to by the host's real kube client over HTTP) and a DRA
//! kubelet stand-in on the demo's plugins registry folder. For every DRA
//! resource it shows the registration, the published ResourceSlice, one
//! sample claim prepared into a CDI spec by the resource's guests (twice,
//! to show the answer is the same), its unprepare, and the health the
//! kubelet was streamed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    AllocationResult, Counter, Device, DeviceAllocationResult, DeviceRequestAllocationResult,
    ResourceClaim, ResourceClaimSpec, ResourceClaimStatus, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use wdp_fake_apiserver::FakeApiServer;
use wdp_host::Host;
use wdp_kubelet_sim::dra::PrepareOutcome;
use wdp_kubelet_sim::{ClaimRef, DraSimOptions, SimDraKubelet};

/// The node the demo publishes for.
pub const DEMO_NODE: &str = "demo-node";

/// How long the demo waits for any one step.
const STEP: Duration = Duration::from_secs(10);

/// The API server and DRA kubelet the demo's DRA resources talk to.
pub struct DraWorld {
    api: Arc<FakeApiServer>,
    kubelet: SimDraKubelet,
    kubeconfig: PathBuf,
}

impl DraWorld {
    /// Starts both in `folder`: the kubeconfig goes there, the DRA kubelet
    /// watches `registry_dir`, and like a real kubelet it wipes the node's
    /// slices when it starts.
    pub async fn start(folder: &Path, registry_dir: &Path) -> anyhow::Result<Self> {
        let api = Arc::new(
            FakeApiServer::start()
                .await
                .context("starting the in-process API server")?,
        );
        let kubeconfig = folder.join("kubeconfig");
        api.write_kubeconfig(&kubeconfig)
            .context("writing the demo kubeconfig")?;
        api.put_node(Node {
            metadata: ObjectMeta {
                name: Some(DEMO_NODE.to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        });
        let wiper = api.clone();
        let kubelet = SimDraKubelet::start(
            registry_dir,
            DraSimOptions {
                wipe: Some(Arc::new(move || {
                    wiper.wipe_node_slices(DEMO_NODE, None);
                })),
                ..DraSimOptions::default()
            },
        )
        .await?;
        println!(
            "simulated API server at {}; simulated DRA kubelet watching {}",
            api.url(),
            registry_dir.display()
        );
        Ok(Self {
            api,
            kubelet,
            kubeconfig,
        })
    }

    /// The kubeconfig the host reaches the API server with.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Shows every DRA resource of `host`, with a sample claim each.
    pub async fn show(&self, host: &Host) -> anyhow::Result<()> {
        let drivers: BTreeMap<String, String> = host
            .dra_status()
            .await
            .into_iter()
            .map(|(resource, (driver, _))| (resource, driver))
            .collect();
        for (resource, driver) in drivers {
            self.show_one(host, &resource, &driver)
                .await
                .with_context(|| format!("DRA resource {resource} (driver {driver})"))?;
        }
        Ok(())
    }

    async fn show_one(&self, host: &Host, resource: &str, driver: &str) -> anyhow::Result<()> {
        self.show_registration(resource, driver).await?;
        let slices = self
            .wait_for_published_slices(host, resource, driver)
            .await?;
        let Some(device) = show_slices(&slices, driver) else {
            println!("  (no untainted device: no sample claim)");
            return Ok(());
        };
        self.show_sample_claim(host, driver, &device).await?;
        self.show_health(driver).await;
        Ok(())
    }

    /// Waits for `driver` to register with the DRA kubelet and prints how.
    async fn show_registration(&self, resource: &str, driver: &str) -> anyhow::Result<()> {
        let record = self.kubelet.wait_registered(driver, STEP).await?;
        println!(
            "\nDRA driver {driver} ({resource}) registered: GetInfo endpoint {}, kubelet chose {}, health {}",
            record.info.endpoint,
            record.chosen_service,
            record.health_service.as_deref().unwrap_or("none")
        );
        Ok(())
    }

    /// Waits until the slices of `driver` on the demo node hold at least
    /// the devices `resource` advertises; returns every slice then stored.
    async fn wait_for_published_slices(
        &self,
        host: &Host,
        resource: &str,
        driver: &str,
    ) -> anyhow::Result<Vec<ResourceSlice>> {
        let expected = host
            .resource(resource)
            .await
            .map(|r| r.devices().len())
            .unwrap_or_default();
        self.api
            .wait_for_slices(
                |all| {
                    let mine: Vec<_> = all.iter().filter(|s| is_demo_slice_of(s, driver)).collect();
                    // Partitions (a dra-layout guest) come on top of the
                    // advertised devices.
                    !mine.is_empty()
                        && mine
                            .iter()
                            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                            .sum::<usize>()
                            >= expected
                },
                STEP,
            )
            .await
            .map_err(|e| anyhow::anyhow!("the slices of {driver} were not published: {e:?}"))
    }

    /// Puts a sample claim on `device`, has the DRA kubelet prepare it
    /// twice and unprepare it, and prints each answer.
    async fn show_sample_claim(
        &self,
        host: &Host,
        driver: &str,
        device: &str,
    ) -> anyhow::Result<()> {
        let claim = self.api.put_claim(sample_claim(driver, device));
        let reference = ClaimRef {
            namespace: claim.metadata.namespace.clone().unwrap_or_default(),
            uid: claim.metadata.uid.clone().unwrap_or_default(),
            name: claim.metadata.name.clone().unwrap_or_default(),
        };
        println!(
            "  sample claim {}/{} allocated {device}:",
            reference.namespace, reference.name
        );
        let first = self
            .kubelet
            .prepare(driver, std::slice::from_ref(&reference))
            .await?;
        let again = self
            .kubelet
            .prepare(driver, std::slice::from_ref(&reference))
            .await?;
        show_prepared(host, &reference, &first, &again);
        let unprepared = self
            .kubelet
            .unprepare(driver, std::slice::from_ref(&reference))
            .await?;
        match unprepared.claims.get(&reference.uid) {
            Some(Ok(())) => println!("    NodeUnprepareResources -> ok (CDI spec removed)"),
            Some(Err(error)) => println!("    NodeUnprepareResources failed: {error}"),
            None => println!("    NodeUnprepareResources left the claim out"),
        }
        Ok(())
    }

    /// Prints the health the DRA kubelet was streamed for `driver`, once
    /// it has any.
    async fn show_health(&self, driver: &str) {
        if let Ok(record) = self
            .kubelet
            .wait_health(driver, STEP, |r| !r.health.is_empty())
            .await
        {
            let healthy = record
                .health
                .values()
                .filter(|h| h.health == wdp_kubelet_sim::dra::DeviceHealth::Healthy)
                .count();
            println!(
                "  health stream: {} devices, {healthy} healthy ({} updates)",
                record.health.len(),
                record.health_updates
            );
        }
    }
}

/// Whether `slice` is one of `driver`'s on the demo node.
fn is_demo_slice_of(slice: &ResourceSlice, driver: &str) -> bool {
    slice.spec.driver == driver && slice.spec.node_name.as_deref() == Some(DEMO_NODE)
}

/// Prints `driver`'s slices on the demo node, their counter sets and
/// devices; returns the first untainted device, the sample claim's pick.
fn show_slices(slices: &[ResourceSlice], driver: &str) -> Option<String> {
    let mut first_device = None;
    for slice in slices.iter().filter(|s| is_demo_slice_of(s, driver)) {
        println!(
            "  ResourceSlice {} (pool {}, generation {}):",
            slice.metadata.name.as_deref().unwrap_or("?"),
            slice.spec.pool.name,
            slice.spec.pool.generation
        );
        for set in slice.spec.shared_counters.iter().flatten() {
            println!(
                "    counter set {}: {}",
                set.name,
                counter_values(&set.counters)
            );
        }
        for device in slice.spec.devices.iter().flatten() {
            println!("    {}", describe_device(device));
            if first_device.is_none() && device.taints.as_ref().is_none_or(Vec::is_empty) {
                first_device = Some(device.name.clone());
            }
        }
    }
    first_device
}

/// `name=value` for each counter, space-separated.
fn counter_values(counters: &BTreeMap<String, Counter>) -> String {
    counters
        .iter()
        .map(|(name, counter)| format!("{name}={}", counter.value.0))
        .collect::<Vec<String>>()
        .join(" ")
}

/// One published device: its name, what it is, its attributes, the
/// counters it consumes and its taints.
fn describe_device(device: &Device) -> String {
    // A device is published under the reversible name of its ID; a
    // partition under its own ID, which seldom decodes.
    let id = wdp_k8s_naming::device_id(&device.name)
        .map(|id| format!("ID {id}"))
        .unwrap_or_else(|_| "a partition".to_owned());
    let consumes = device
        .consumes_counters
        .iter()
        .flatten()
        .map(|c| {
            format!(
                " consumes {} of {}",
                counter_values(&c.counters),
                c.counter_set
            )
        })
        .collect::<String>();
    let attributes = device
        .attributes
        .iter()
        .flatten()
        .map(|(k, v)| {
            let value = v
                .string
                .clone()
                .or_else(|| v.int.map(|i| i.to_string()))
                .or_else(|| v.bool.map(|b| b.to_string()))
                .or_else(|| v.version.clone())
                .unwrap_or_default();
            format!("{k}={value}")
        })
        .collect::<Vec<_>>()
        .join(" ");
    let taints = device
        .taints
        .iter()
        .flatten()
        .map(|t| {
            format!(
                " taint {}={}:{}",
                t.key,
                t.value.as_deref().unwrap_or(""),
                t.effect
            )
        })
        .collect::<String>();
    format!("{} ({id}) {attributes}{consumes}{taints}", device.name)
}

/// Prints what the first prepare of the sample claim `reference` gave,
/// whether the second gave the same, and the CDI spec written.
fn show_prepared(
    host: &Host,
    reference: &ClaimRef,
    first: &PrepareOutcome,
    again: &PrepareOutcome,
) {
    match first.claims.get(&reference.uid) {
        Some(Ok(devices)) => {
            for d in devices {
                println!(
                    "    NodePrepareResources ({}) -> {} for request {:?}: {}",
                    first.service,
                    d.device_name,
                    d.request_names,
                    d.cdi_device_ids.join(", ")
                );
            }
            println!(
                "    prepared again: {} ({:.0} µs, then {:.0} µs)",
                if again.claims.get(&reference.uid) == first.claims.get(&reference.uid) {
                    "the same answer"
                } else {
                    "a DIFFERENT answer"
                },
                first.elapsed.as_secs_f64() * 1e6,
                again.elapsed.as_secs_f64() * 1e6
            );
            show_cdi_spec(&host.options().cdi_dir, &reference.uid);
        }
        Some(Err(error)) => println!("    NodePrepareResources failed: {error}"),
        None => println!("    NodePrepareResources left the claim out"),
    }
}

/// A claim in namespace `demo` allocated one device of `driver` on the
/// demo node, as the scheduler would have written it.
fn sample_claim(driver: &str, device: &str) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("sample-{device}")),
            namespace: Some("demo".to_owned()),
            ..ObjectMeta::default()
        },
        spec: ResourceClaimSpec::default(),
        status: Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        request: "device".to_owned(),
                        driver: driver.to_owned(),
                        pool: DEMO_NODE.to_owned(),
                        device: device.to_owned(),
                        ..DeviceRequestAllocationResult::default()
                    }]),
                    config: None,
                }),
                ..AllocationResult::default()
            }),
            ..ResourceClaimStatus::default()
        }),
    }
}

/// Prints the container edits of the CDI spec written for claim `uid`.
fn show_cdi_spec(cdi_dir: &Path, uid: &str) {
    let Ok(entries) = std::fs::read_dir(cdi_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.contains(uid) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let Ok(spec) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        println!("    CDI spec {name} (cdiVersion {}):", spec["cdiVersion"]);
        for device in spec["devices"].as_array().into_iter().flatten() {
            let edits = &device["containerEdits"];
            for node in edits["deviceNodes"].as_array().into_iter().flatten() {
                println!("      {}: node {}", device["name"], node["path"]);
            }
            for env in edits["env"].as_array().into_iter().flatten() {
                println!("      {}: env {env}", device["name"]);
            }
        }
        for env in spec["containerEdits"]["env"]
            .as_array()
            .into_iter()
            .flatten()
        {
            println!("      every device: env {env}");
        }
    }
}
