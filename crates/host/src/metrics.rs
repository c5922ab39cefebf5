//! Prometheus metrics of the host, in the text exposition format. Names
//! follow Prometheus conventions: a `wasm_device_plugin_` prefix, base units
//! (`_seconds`), and `_total` on counters.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set: the resource.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    /// Extended resource name.
    pub resource: String,
}

/// Label set: the resource and `healthy` / `unhealthy`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthLabels {
    /// Extended resource name.
    pub resource: String,
    /// `healthy` or `unhealthy`.
    pub health: String,
}

/// Label set: the resource and the kubelet RPC.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    /// Extended resource name.
    pub resource: String,
    /// The RPC, e.g. `Allocate`.
    pub rpc: String,
}

/// Label set: the resource, the kubelet RPC and its gRPC status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcResultLabels {
    /// Extended resource name.
    pub resource: String,
    /// The RPC, e.g. `Allocate`.
    pub rpc: String,
    /// The gRPC status code, e.g. `Ok`.
    pub code: String,
}

/// Label set: the resource, the guest and the hook.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLabels {
    /// Extended resource name.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook, e.g. `health`.
    pub hook: String,
}

/// Label set: the resource, the guest, the hook and the call's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestResultLabels {
    /// Extended resource name.
    pub resource: String,
    /// The guest's name.
    pub guest: String,
    /// The hook, e.g. `health`.
    pub hook: String,
    /// The outcome.
    pub result: String,
}

/// Label set: `success` or `failure`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// The outcome.
    pub result: String,
}

/// Label set: the resource and the registration's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RegistrationLabels {
    /// Extended resource name.
    pub resource: String,
    /// The outcome.
    pub result: String,
}

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
    /// `wasm_device_plugin_registrations_total`.
    pub registrations: Family<RegistrationLabels, Counter>,
    /// `wasm_device_plugin_kubelet_restarts_total`.
    pub kubelet_restarts: Counter,
    /// `wasm_device_plugin_list_and_watch_streams`.
    pub watchers: Family<ResourceLabel, Gauge>,
}

fn latency_histogram() -> Histogram {
    // 20 µs .. ~40 s.
    Histogram::new(exponential_buckets(0.000_02, 2.5, 16))
}

impl Metrics {
    /// Every metric, registered and at zero.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("wasm_device_plugin");
        let devices = Family::<HealthLabels, Gauge>::default();
        registry.register(
            "devices",
            "Devices advertised to the kubelet, by resource and health",
            devices.clone(),
        );
        let allocated_devices = Family::<ResourceLabel, Counter>::default();
        registry.register(
            "allocated_devices",
            "Device IDs handed to containers through Allocate",
            allocated_devices.clone(),
        );
        let rpc_requests = Family::<RpcResultLabels, Counter>::default();
        registry.register(
            "rpc_requests",
            "Kubelet RPCs served, by resource, RPC and gRPC status code",
            rpc_requests.clone(),
        );
        let rpc_duration =
            Family::<RpcLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register(
            "rpc_duration_seconds",
            "Time to answer a kubelet RPC",
            rpc_duration.clone(),
        );
        let guest_calls = Family::<GuestResultLabels, Counter>::default();
        registry.register(
            "guest_calls",
            "Guest hook calls by result: ok, trap, timeout, out-of-memory, guest-error, invalid-answer",
            guest_calls.clone(),
        );
        let guest_duration =
            Family::<GuestLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> _);
        registry.register(
            "guest_call_duration_seconds",
            "Time of a guest hook call, instantiation included",
            guest_duration.clone(),
        );
        let guest_calls_in_flight = Family::<GuestLabels, Gauge>::default();
        registry.register(
            "guest_calls_in_flight",
            "Guest hook calls running right now",
            guest_calls_in_flight.clone(),
        );
        let reloads = Family::<ResultLabel, Counter>::default();
        registry.register(
            "reloads",
            "Configuration reloads by result (success, failure)",
            reloads.clone(),
        );
        let config_valid = Gauge::default();
        registry.register(
            "config_valid",
            "1 when the configuration directory's latest content was applied, 0 when it was refused",
            config_valid.clone(),
        );
        let registrations = Family::<RegistrationLabels, Counter>::default();
        registry.register(
            "registrations",
            "Registrations by resource and result: Register calls on kubelet.sock, or NotifyRegistrationStatus answers from the plugin watcher",
            registrations.clone(),
        );
        let kubelet_restarts = Counter::default();
        registry.register(
            "kubelet_restarts",
            "Kubelet restarts noticed (kubelet.sock created again or our socket removed)",
            kubelet_restarts.clone(),
        );
        let watchers = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "list_and_watch_streams",
            "Open ListAndWatch streams per resource",
            watchers.clone(),
        );
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
            registrations,
            kubelet_restarts,
            watchers,
        })
    }

    /// The metrics in Prometheus text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Counts one kubelet RPC and its duration.
    pub fn observe_rpc(&self, resource: &str, rpc: &str, code: tonic::Code, elapsed: Duration) {
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
                code: format!("{code:?}"),
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

    /// Counts one reload and sets `config_valid`.
    pub fn reload(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
        self.config_valid.set(i64::from(ok));
    }
}
