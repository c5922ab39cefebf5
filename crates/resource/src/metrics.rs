//! Prometheus metrics of the host, in the text exposition format. Names
//! follow Prometheus conventions: a `wasm_device_plugin_` prefix, base units
//! (`_seconds`), and `_total` on counters.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod labels;

pub use labels::{
    ConfigSetLabels, DraClaimLabels, DraClaimResultLabels, DraOperation, DriverLabel, GuestLabels,
    GuestResultLabels, HealthLabels, RegistrationLabels, ResourceDriverLabels, ResourceLabel,
    ResultLabel, RpcLabels, RpcResultLabels,
};

/// The `result` label of a claim: `success` or `failure`.
fn claim_result(ok: bool) -> &'static str {
    if ok { "success" } else { "failure" }
}

/// A callback counting one registration of a resource: `(resource, ok)`.
pub type RegistrationObserver = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// Every metric the host records, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// `wasm_device_plugin_devices`.
    pub devices: Family<HealthLabels, Gauge>,
    /// `wasm_device_plugin_allocated_devices_total`.
    pub allocated_devices: Family<ResourceLabel, Counter>,
    /// `wasm_device_plugin_rpc_requests_total`.
    pub rpc_requests: Family<RpcResultLabels, Counter>,
    /// `wasm_device_plugin_rpc_duration_seconds`.
    pub rpc_duration: Family<RpcLabels, Histogram>,
    /// `wasm_device_plugin_guest_calls_total`.
    pub guest_calls: Family<GuestResultLabels, Counter>,
    /// `wasm_device_plugin_guest_call_duration_seconds`.
    pub guest_duration: Family<GuestLabels, Histogram>,
    /// `wasm_device_plugin_guest_calls_in_flight`.
    pub guest_calls_in_flight: Family<GuestLabels, Gauge>,
    /// `wasm_device_plugin_reloads_total`.
    pub reloads: Family<ResultLabel, Counter>,
    /// `wasm_device_plugin_config_valid`.
    pub config_valid: Gauge,
    /// `wasm_device_plugin_config_set_info`: 1 for the configuration set
    /// being served, by set name and digest.
    pub config_set_info: Family<ConfigSetLabels, Gauge>,
    /// `wasm_device_plugin_registrations_total`.
    pub registrations: Family<RegistrationLabels, Counter>,
    /// `wasm_device_plugin_kubelet_restarts_total`.
    pub kubelet_restarts: Counter,
    /// `wasm_device_plugin_list_and_watch_streams`.
    pub watchers: Family<ResourceLabel, Gauge>,
    /// `wasm_device_plugin_dra_claims_total`.
    pub dra_claims: Family<DraClaimResultLabels, Counter>,
    /// `wasm_device_plugin_dra_claim_duration_seconds`.
    pub dra_claim_duration: Family<DraClaimLabels, Histogram>,
    /// `wasm_device_plugin_dra_slice_publish_errors_total`.
    pub dra_publish_errors: Family<DriverLabel, Counter>,
    /// `wasm_device_plugin_dra_slice_writes_total`.
    pub dra_slice_writes: Family<DriverLabel, Counter>,
    /// `wasm_device_plugin_dra_published_generation`.
    pub dra_published_generation: Family<DriverLabel, Gauge>,
    /// `wasm_device_plugin_dra_published_slices`.
    pub dra_published_slices: Family<DriverLabel, Gauge>,
    /// `wasm_device_plugin_dra_driver_info`: 1 per resource served as a DRA
    /// driver.
    pub dra_driver_info: Family<ResourceDriverLabels, Gauge>,
}

/// Registers `metric` under `name` with `help`; answers it, for the
/// struct to keep.
fn registered<M: prometheus_client::registry::Metric + Clone>(
    registry: &mut Registry,
    name: &str,
    help: &str,
    metric: M,
) -> M {
    registry.register(name, help, metric.clone());
    metric
}

fn latency_histogram() -> Histogram {
    // 20 µs .. ~40 s.
    Histogram::new(exponential_buckets(0.000_02, 2.5, 16))
}

impl Metrics {
    /// Every metric, registered and at zero.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("wasm_device_plugin");
        let devices = registered(
            &mut registry,
            "devices",
            "Devices advertised to the kubelet, by resource and health",
            Family::<HealthLabels, Gauge>::default(),
        );
        let allocated_devices = registered(
            &mut registry,
            "allocated_devices",
            "Device IDs handed to containers through Allocate",
            Family::<ResourceLabel, Counter>::default(),
        );
        let rpc_requests = registered(
            &mut registry,
            "rpc_requests",
            "Kubelet RPCs served, by resource, RPC and gRPC status code",
            Family::<RpcResultLabels, Counter>::default(),
        );
        let rpc_duration = registered(
            &mut registry,
            "rpc_duration_seconds",
            "Time to answer a kubelet RPC",
            Family::<RpcLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _),
        );
        let guest_calls = registered(
            &mut registry,
            "guest_calls",
            "Guest hook calls by result: ok, trap, timeout, out-of-memory, guest-error, invalid-answer",
            Family::<GuestResultLabels, Counter>::default(),
        );
        let guest_duration = registered(
            &mut registry,
            "guest_call_duration_seconds",
            "Time of a guest hook call, instantiation included",
            Family::<GuestLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _),
        );
        let guest_calls_in_flight = registered(
            &mut registry,
            "guest_calls_in_flight",
            "Guest hook calls running right now",
            Family::<GuestLabels, Gauge>::default(),
        );
        let reloads = registered(
            &mut registry,
            "reloads",
            "Configuration reloads by result (success, failure)",
            Family::<ResultLabel, Counter>::default(),
        );
        let config_valid = registered(
            &mut registry,
            "config_valid",
            "1 when the configuration directory's latest content was applied, 0 when it was refused",
            Gauge::default(),
        );
        let config_set_info = registered(
            &mut registry,
            "config_set_info",
            "1 for the configuration set this node serves (picked by its node label, else default), by set and the digest of its files",
            Family::<ConfigSetLabels, Gauge>::default(),
        );
        let registrations = registered(
            &mut registry,
            "registrations",
            "Registrations by resource and result: Register calls on kubelet.sock, or NotifyRegistrationStatus answers from the plugin watcher",
            Family::<RegistrationLabels, Counter>::default(),
        );
        let kubelet_restarts = registered(
            &mut registry,
            "kubelet_restarts",
            "Kubelet restarts noticed (kubelet.sock created again or our socket removed)",
            Counter::default(),
        );
        let watchers = registered(
            &mut registry,
            "list_and_watch_streams",
            "Open ListAndWatch streams per resource",
            Family::<ResourceLabel, Gauge>::default(),
        );
        let dra = DraMetrics::register(&mut registry);
        Arc::new(Self {
            registry,
            devices,
            allocated_devices,
            rpc_requests,
            rpc_duration,
            guest_calls,
            guest_duration,
            guest_calls_in_flight,
            reloads,
            config_valid,
            config_set_info,
            registrations,
            kubelet_restarts,
            watchers,
            dra_claims: dra.claims,
            dra_claim_duration: dra.claim_duration,
            dra_publish_errors: dra.publish_errors,
            dra_slice_writes: dra.slice_writes,
            dra_published_generation: dra.published_generation,
            dra_published_slices: dra.published_slices,
            dra_driver_info: dra.driver_info,
        })
    }

    /// The metrics in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts one kubelet RPC and its duration; `code` is the gRPC status
    /// code's name (`Ok`, `InvalidArgument`, ...).
    pub fn observe_rpc(&self, resource: &str, rpc: &str, code: &str, elapsed: Duration) {
        self.rpc_duration
            .get_or_create(&RpcLabels {
                resource: resource.to_owned(),
                rpc: rpc.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        self.rpc_requests
            .get_or_create(&RpcResultLabels {
                resource: resource.to_owned(),
                rpc: rpc.to_owned(),
                code: code.to_owned(),
            })
            .inc();
    }

    /// Counts one guest call by result and records its duration.
    pub fn observe_guest(
        &self,
        resource: &str,
        guest: &str,
        hook: &str,
        result: &str,
        elapsed: Duration,
    ) {
        let labels = GuestLabels {
            resource: resource.to_owned(),
            guest: guest.to_owned(),
            hook: hook.to_owned(),
        };
        self.guest_duration
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
        self.guest_calls
            .get_or_create(&GuestResultLabels {
                resource: labels.resource,
                guest: labels.guest,
                hook: labels.hook,
                result: result.to_owned(),
            })
            .inc();
    }

    /// Sets a resource's healthy and unhealthy device counts.
    pub fn set_devices(&self, resource: &str, healthy: usize, unhealthy: usize) {
        for (health, n) in [("healthy", healthy), ("unhealthy", unhealthy)] {
            self.devices
                .get_or_create(&HealthLabels {
                    resource: resource.to_owned(),
                    health: health.to_owned(),
                })
                .set(n as i64);
        }
    }

    /// Drops the per-resource device gauges of a removed resource.
    pub fn forget_resource(&self, resource: &str) {
        for health in ["healthy", "unhealthy"] {
            self.devices.remove(&HealthLabels {
                resource: resource.to_owned(),
                health: health.to_owned(),
            });
        }
        self.watchers.remove(&ResourceLabel {
            resource: resource.to_owned(),
        });
    }

    /// Counts one registration by result (`Register` on `kubelet.sock`,
    /// or the plugin watcher's `NotifyRegistrationStatus`).
    pub fn registration(&self, resource: &str, ok: bool) {
        self.registrations
            .get_or_create(&RegistrationLabels {
                resource: resource.to_owned(),
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
    }

    /// [`registration`](Self::registration) as a callback, for a
    /// registration socket that reports the plugin watcher's verdicts.
    pub fn registration_observer(self: &Arc<Self>) -> RegistrationObserver {
        let metrics = self.clone();
        Arc::new(move |resource, ok| metrics.registration(resource, ok))
    }

    /// The configuration set served now (the one before is cleared).
    pub fn set_config_set(&self, set: &str, digest: &str) {
        self.config_set_info.clear();
        self.config_set_info
            .get_or_create(&ConfigSetLabels {
                set: set.to_owned(),
                digest: digest.to_owned(),
            })
            .set(1);
    }

    /// Counts one reload and sets `config_valid`.
    pub fn reload(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
        self.config_valid.set(i64::from(ok));
    }

    /// Counts one claim of a `NodePrepareResources` or
    /// `NodeUnprepareResources` call by outcome and records how long that
    /// claim took (for prepare: claim read, guests and CDI write included).
    pub fn observe_dra_claim(
        &self,
        driver: &str,
        operation: DraOperation,
        ok: bool,
        elapsed: Duration,
    ) {
        self.dra_claim_duration
            .get_or_create(&DraClaimLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        self.dra_claims
            .get_or_create(&DraClaimResultLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
                result: claim_result(ok).to_owned(),
            })
            .inc();
    }

    /// Counts one failed ResourceSlice publish pass of `driver`.
    pub fn dra_publish_error(&self, driver: &str) {
        self.dra_publish_errors
            .get_or_create(&DriverLabel {
                driver: driver.to_owned(),
            })
            .inc();
    }

    /// Counts `writes` ResourceSlice writes (creates, replaces, deletes)
    /// `driver`'s publisher made.
    pub fn dra_slice_writes(&self, driver: &str, writes: u64) {
        self.dra_slice_writes
            .get_or_create(&DriverLabel {
                driver: driver.to_owned(),
            })
            .inc_by(writes);
    }

    /// Records the pool generation and slice count `driver` last published.
    pub fn set_dra_published(&self, driver: &str, generation: i64, slices: usize) {
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        self.dra_published_generation
            .get_or_create(&label)
            .set(generation);
        self.dra_published_slices
            .get_or_create(&label)
            .set(i64::try_from(slices).unwrap_or(i64::MAX));
    }

    /// Records that `resource` is served as DRA driver `driver`, and shows
    /// the driver's counters and claim histograms at zero: an alert's
    /// `increase()` sees the first failure only on a series that existed
    /// before it.
    pub fn set_dra_driver(&self, resource: &str, driver: &str) {
        self.dra_driver_info
            .get_or_create(&ResourceDriverLabels {
                resource: resource.to_owned(),
                driver: driver.to_owned(),
            })
            .set(1);
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        let _ = self.dra_publish_errors.get_or_create(&label);
        let _ = self.dra_slice_writes.get_or_create(&label);
        for operation in [DraOperation::Prepare, DraOperation::Unprepare] {
            let _ = self.dra_claim_duration.get_or_create(&DraClaimLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
            });
            for ok in [true, false] {
                let _ = self.dra_claims.get_or_create(&DraClaimResultLabels {
                    driver: driver.to_owned(),
                    operation: operation.as_str().to_owned(),
                    result: claim_result(ok).to_owned(),
                });
            }
        }
    }

    /// Drops the per-driver gauges of DRA resource `resource`, served as
    /// `driver`, that left the config.
    pub fn forget_driver(&self, resource: &str, driver: &str) {
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        self.dra_published_generation.remove(&label);
        self.dra_published_slices.remove(&label);
        self.dra_driver_info.remove(&ResourceDriverLabels {
            resource: resource.to_owned(),
            driver: driver.to_owned(),
        });
    }
}

/// The DRA metric families, registered together.
struct DraMetrics {
    claims: Family<DraClaimResultLabels, Counter>,
    claim_duration: Family<DraClaimLabels, Histogram>,
    publish_errors: Family<DriverLabel, Counter>,
    slice_writes: Family<DriverLabel, Counter>,
    published_generation: Family<DriverLabel, Gauge>,
    published_slices: Family<DriverLabel, Gauge>,
    driver_info: Family<ResourceDriverLabels, Gauge>,
}

impl DraMetrics {
    fn register(registry: &mut Registry) -> Self {
        let claims = Family::<DraClaimResultLabels, Counter>::default();
        registry.register(
            "dra_claims",
            "Claims of NodePrepareResources / NodeUnprepareResources calls, by driver, operation and result",
            claims.clone(),
        );
        let claim_duration = Family::<DraClaimLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> _,
        );
        registry.register(
            "dra_claim_duration_seconds",
            "Time to prepare or unprepare one claim (claim read, guests and CDI write included)",
            claim_duration.clone(),
        );
        let publish_errors = Family::<DriverLabel, Counter>::default();
        registry.register(
            "dra_slice_publish_errors",
            "ResourceSlice publish passes that failed (API server unreachable, slice rejected, conflict)",
            publish_errors.clone(),
        );
        let slice_writes = Family::<DriverLabel, Counter>::default();
        registry.register(
            "dra_slice_writes",
            "ResourceSlice writes (creates, replaces, deletes) the driver's publisher made; a pass writes only the slices that changed, at most one pass per publish-interval-ms",
            slice_writes.clone(),
        );
        let published_generation = Family::<DriverLabel, Gauge>::default();
        registry.register(
            "dra_published_generation",
            "Pool generation of the driver's ResourceSlices last published",
            published_generation.clone(),
        );
        let published_slices = Family::<DriverLabel, Gauge>::default();
        registry.register(
            "dra_published_slices",
            "ResourceSlices the driver last published for this node",
            published_slices.clone(),
        );
        let driver_info = Family::<ResourceDriverLabels, Gauge>::default();
        registry.register(
            "dra_driver_info",
            "1 for each resource served as a DRA driver, by resource and driver (it has no ListAndWatch stream)",
            driver_info.clone(),
        );
        Self {
            claims,
            claim_duration,
            publish_errors,
            slice_writes,
            published_generation,
            published_slices,
            driver_info,
        }
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
