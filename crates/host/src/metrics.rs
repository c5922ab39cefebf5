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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceLabel {
    pub resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HealthLabels {
    pub resource: String,
    pub health: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub resource: String,
    pub rpc: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcResultLabels {
    pub resource: String,
    pub rpc: String,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestLabels {
    pub resource: String,
    pub guest: String,
    pub hook: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuestResultLabels {
    pub resource: String,
    pub guest: String,
    pub hook: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RegistrationLabels {
    pub resource: String,
    pub result: String,
}

/// Every metric the host records, registered once.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub devices: Family<HealthLabels, Gauge>,
    pub allocated_devices: Family<ResourceLabel, Counter>,
    pub rpc_requests: Family<RpcResultLabels, Counter>,
    pub rpc_duration: Family<RpcLabels, Histogram>,
    pub guest_calls: Family<GuestResultLabels, Counter>,
    pub guest_duration: Family<GuestLabels, Histogram>,
    pub reloads: Family<ResultLabel, Counter>,
    pub config_valid: Gauge,
    pub registrations: Family<RegistrationLabels, Counter>,
    pub kubelet_restarts: Counter,
    pub watchers: Family<ResourceLabel, Gauge>,
}

fn latency_histogram() -> Histogram {
    // 20 µs .. ~40 s.
    Histogram::new(exponential_buckets(0.000_02, 2.5, 16))
}

impl Metrics {
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
            "Register calls to the kubelet by resource and result",
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

    pub fn registration(&self, resource: &str, ok: bool) {
        self.registrations
            .get_or_create(&RegistrationLabels {
                resource: resource.to_owned(),
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
    }

    pub fn reload(&self, ok: bool) {
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
        self.config_valid.set(i64::from(ok));
    }
}
