//! The Prometheus metric families both kubelet protocols count, owned here
//! because one registry takes a name once: kubelet RPCs served (count and
//! duration, by resource, RPC and gRPC status code) and registrations
//! (`Register` on `kubelet.sock`, or the plugin watcher's
//! `NotifyRegistrationStatus` verdicts on a registration socket).
//! [`KubeletMetrics::register`] puts them in the one registry the host
//! builds.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::plugin_watcher::StatusObserver;

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

/// Label set: the resource and the registration's result.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RegistrationLabels {
    /// Extended resource name.
    pub resource: String,
    /// The outcome.
    pub result: String,
}

/// The families both kubelet protocols count, registered once.
#[derive(Debug)]
pub struct KubeletMetrics {
    /// `wasm_device_plugin_rpc_requests_total`.
    pub rpc_requests: Family<RpcResultLabels, Counter>,
    /// `wasm_device_plugin_rpc_duration_seconds`.
    pub rpc_duration: Family<RpcLabels, Histogram>,
    /// `wasm_device_plugin_registrations_total`.
    pub registrations: Family<RegistrationLabels, Counter>,
}

impl KubeletMetrics {
    /// The kubelet-facing families, registered in `registry` and at zero.
    /// `latency_histogram` makes the RPC duration histograms: the host
    /// passes `wdp_resource::latency_histogram`, the buckets every
    /// duration histogram shares (this crate is below none of it).
    pub fn register(registry: &mut Registry, latency_histogram: fn() -> Histogram) -> Arc<Self> {
        let metrics = Self {
            rpc_requests: Family::default(),
            rpc_duration: Family::new_with_constructor(latency_histogram),
            registrations: Family::default(),
        };
        registry.register(
            "rpc_requests",
            "Kubelet RPCs served, by resource, RPC and gRPC status code",
            metrics.rpc_requests.clone(),
        );
        registry.register(
            "rpc_duration_seconds",
            "Time to answer a kubelet RPC",
            metrics.rpc_duration.clone(),
        );
        registry.register(
            "registrations",
            "Registrations by resource and result: Register calls on kubelet.sock, or NotifyRegistrationStatus answers from the plugin watcher",
            metrics.registrations.clone(),
        );
        Arc::new(metrics)
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
    pub fn registration_observer(self: &Arc<Self>) -> StatusObserver {
        let metrics = self.clone();
        Arc::new(move |resource, ok| metrics.registration(resource, ok))
    }
}
