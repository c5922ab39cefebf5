//! The Prometheus metric families the DRA driver counts (`dra_*`): claims
//! prepared and unprepared (count and duration), ResourceSlice publishing
//! (failed passes, writes, the generation and slice count last published)
//! and which resource each driver serves. Its RPCs and registrations it
//! counts into the kubelet-facing families of
//! [`wdp_kubelet_socket::metrics`], which it shares with the device-plugin
//! transport. [`DraMetrics::register`] puts its families in the one
//! registry the host builds.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use wdp_kubelet_socket::KubeletMetrics;
use wdp_resource::latency_histogram;

/// Label set: the DRA driver.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriverLabel {
    /// The DRA driver name.
    pub driver: String,
}

/// Label set: a resource and the DRA driver serving it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResourceDriverLabels {
    /// The resource name.
    pub resource: String,
    /// The DRA driver name.
    pub driver: String,
}

/// Label set: the DRA driver and the claim operation.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DraClaimLabels {
    /// The DRA driver name.
    pub driver: String,
    /// `prepare` or `unprepare`.
    pub operation: String,
}

/// Label set: the DRA driver, the claim operation and its outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DraClaimResultLabels {
    /// The DRA driver name.
    pub driver: String,
    /// `prepare` or `unprepare`.
    pub operation: String,
    /// `success` or `failure`.
    pub result: String,
}

/// Label set: the DRA driver, a passthrough operation and its outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassthroughLabels {
    /// The DRA driver name.
    pub driver: String,
    /// `bind` (an IOMMU group to the resource's `bind-driver`) or
    /// `restore` (back to the drivers it had).
    pub operation: String,
    /// `success`, `refused` (by the host or a guest; nothing moved) or
    /// `failure` (undone, or for a restore: the group is left where it
    /// was and the next unprepare tries again).
    pub result: String,
}

/// How one passthrough bind or restore ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PassthroughOutcome {
    /// Done.
    Success,
    /// Refused by the host or a guest before anything moved.
    Refused,
    /// Failed or timed out.
    Failure,
}

impl PassthroughOutcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Refused => "refused",
            Self::Failure => "failure",
        }
    }
}

/// What the kubelet asked a DRA driver to do with one claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DraOperation {
    /// `NodePrepareResources`, one claim of it.
    Prepare,
    /// `NodeUnprepareResources`, one claim of it.
    Unprepare,
}

impl DraOperation {
    /// The label value: `prepare` or `unprepare`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Unprepare => "unprepare",
        }
    }
}

/// The `result` label of a claim: `success` or `failure`.
fn claim_result(ok: bool) -> &'static str {
    if ok { "success" } else { "failure" }
}

/// What the DRA driver counts, registered once.
#[derive(Debug)]
pub struct DraMetrics {
    /// `wasm_device_plugin_dra_claims_total`.
    pub claims: Family<DraClaimResultLabels, Counter>,
    /// `wasm_device_plugin_dra_claim_duration_seconds`.
    pub claim_duration: Family<DraClaimLabels, Histogram>,
    /// `wasm_device_plugin_dra_slice_publish_errors_total`.
    pub publish_errors: Family<DriverLabel, Counter>,
    /// `wasm_device_plugin_dra_slice_writes_total`.
    pub slice_writes: Family<DriverLabel, Counter>,
    /// `wasm_device_plugin_dra_published_generation`.
    pub published_generation: Family<DriverLabel, Gauge>,
    /// `wasm_device_plugin_dra_published_slices`.
    pub published_slices: Family<DriverLabel, Gauge>,
    /// `wasm_device_plugin_dra_driver_info`: 1 per resource served as a DRA
    /// driver.
    pub driver_info: Family<ResourceDriverLabels, Gauge>,
    /// `wasm_device_plugin_dra_passthrough_operations_total`.
    pub passthrough: Family<PassthroughLabels, Counter>,
    /// `wasm_device_plugin_dra_passthrough_duration_seconds`.
    pub passthrough_duration: Family<DraClaimLabels, Histogram>,
    /// The RPC and registration families, registered by their owner.
    pub kubelet: Arc<KubeletMetrics>,
}

impl DraMetrics {
    /// The `dra_*` families, registered in `registry` and at zero, beside
    /// the already registered `kubelet` families it counts into too.
    pub fn register(registry: &mut Registry, kubelet: Arc<KubeletMetrics>) -> Arc<Self> {
        let metrics = Self {
            claims: Family::default(),
            claim_duration: Family::new_with_constructor(latency_histogram as fn() -> _),
            publish_errors: Family::default(),
            slice_writes: Family::default(),
            published_generation: Family::default(),
            published_slices: Family::default(),
            driver_info: Family::default(),
            passthrough: Family::default(),
            passthrough_duration: Family::new_with_constructor(latency_histogram as fn() -> _),
            kubelet,
        };
        registry.register(
            "dra_claims",
            "Claims of NodePrepareResources / NodeUnprepareResources calls, by driver, operation and result",
            metrics.claims.clone(),
        );
        registry.register(
            "dra_claim_duration_seconds",
            "Time to prepare or unprepare one claim (claim read, guests and CDI write included)",
            metrics.claim_duration.clone(),
        );
        registry.register(
            "dra_slice_publish_errors",
            "ResourceSlice publish passes that failed (API server unreachable, slice rejected, conflict)",
            metrics.publish_errors.clone(),
        );
        registry.register(
            "dra_slice_writes",
            "ResourceSlice writes (creates, replaces, deletes) the driver's publisher made; a pass writes only the slices that changed, at most one pass per publish-interval-ms",
            metrics.slice_writes.clone(),
        );
        registry.register(
            "dra_published_generation",
            "Pool generation of the driver's ResourceSlices last published",
            metrics.published_generation.clone(),
        );
        registry.register(
            "dra_published_slices",
            "ResourceSlices the driver last published for this node",
            metrics.published_slices.clone(),
        );
        registry.register(
            "dra_driver_info",
            "1 for each resource served as a DRA driver, by resource and driver (it has no ListAndWatch stream)",
            metrics.driver_info.clone(),
        );
        registry.register(
            "dra_passthrough_operations",
            "IOMMU groups bound to a resource's [passthrough] driver for a claim (operation bind) or back to their drivers (restore), by driver and result (success, refused, failure)",
            metrics.passthrough.clone(),
        );
        registry.register(
            "dra_passthrough_duration_seconds",
            "Time to bind one IOMMU group to the [passthrough] driver, or back (its `operation` label: bind or restore)",
            metrics.passthrough_duration.clone(),
        );
        Arc::new(metrics)
    }

    /// Counts one passthrough bind or restore of `driver` (`operation`:
    /// `bind` or `restore`) and, unless refused, how long it took.
    pub fn observe_passthrough(
        &self,
        driver: &str,
        operation: &str,
        outcome: PassthroughOutcome,
        elapsed: Duration,
    ) {
        if outcome != PassthroughOutcome::Refused {
            self.passthrough_duration
                .get_or_create(&DraClaimLabels {
                    driver: driver.to_owned(),
                    operation: operation.to_owned(),
                })
                .observe(elapsed.as_secs_f64());
        }
        self.passthrough
            .get_or_create(&PassthroughLabels {
                driver: driver.to_owned(),
                operation: operation.to_owned(),
                result: outcome.as_str().to_owned(),
            })
            .inc();
    }

    /// Counts one claim of a `NodePrepareResources` or
    /// `NodeUnprepareResources` call by outcome and records how long that
    /// claim took (for prepare: claim read, guests and CDI write included).
    pub fn observe_claim(
        &self,
        driver: &str,
        operation: DraOperation,
        ok: bool,
        elapsed: Duration,
    ) {
        self.claim_duration
            .get_or_create(&DraClaimLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
            })
            .observe(elapsed.as_secs_f64());
        self.claims
            .get_or_create(&DraClaimResultLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
                result: claim_result(ok).to_owned(),
            })
            .inc();
    }

    /// Counts one failed ResourceSlice publish pass of `driver`.
    pub fn publish_error(&self, driver: &str) {
        self.publish_errors
            .get_or_create(&DriverLabel {
                driver: driver.to_owned(),
            })
            .inc();
    }

    /// Counts `writes` ResourceSlice writes (creates, replaces, deletes)
    /// `driver`'s publisher made.
    pub fn count_slice_writes(&self, driver: &str, writes: u64) {
        self.slice_writes
            .get_or_create(&DriverLabel {
                driver: driver.to_owned(),
            })
            .inc_by(writes);
    }

    /// Records the pool generation and slice count `driver` last published.
    pub fn set_published(&self, driver: &str, generation: i64, slices: usize) {
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        self.published_generation
            .get_or_create(&label)
            .set(generation);
        self.published_slices
            .get_or_create(&label)
            .set(i64::try_from(slices).unwrap_or(i64::MAX));
    }

    /// Records that `resource` is served as DRA driver `driver`, and shows
    /// the driver's counters and claim histograms at zero: an alert's
    /// `increase()` sees the first failure only on a series that existed
    /// before it.
    pub fn set_driver(&self, resource: &str, driver: &str) {
        self.driver_info
            .get_or_create(&ResourceDriverLabels {
                resource: resource.to_owned(),
                driver: driver.to_owned(),
            })
            .set(1);
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        let _ = self.publish_errors.get_or_create(&label);
        let _ = self.slice_writes.get_or_create(&label);
        for operation in [DraOperation::Prepare, DraOperation::Unprepare] {
            let _ = self.claim_duration.get_or_create(&DraClaimLabels {
                driver: driver.to_owned(),
                operation: operation.as_str().to_owned(),
            });
            for ok in [true, false] {
                let _ = self.claims.get_or_create(&DraClaimResultLabels {
                    driver: driver.to_owned(),
                    operation: operation.as_str().to_owned(),
                    result: claim_result(ok).to_owned(),
                });
            }
        }
        // Binds and restores ([passthrough]): failures at zero too, so the
        // alert on restores sees the first one (and every scrape carries
        // the family the alert queries).
        for operation in ["bind", "restore"] {
            let _ = self.passthrough.get_or_create(&PassthroughLabels {
                driver: driver.to_owned(),
                operation: operation.to_owned(),
                result: PassthroughOutcome::Failure.as_str().to_owned(),
            });
        }
    }

    /// Drops the per-driver gauges of DRA resource `resource`, served as
    /// `driver`, that left the config.
    pub fn forget_driver(&self, resource: &str, driver: &str) {
        let label = DriverLabel {
            driver: driver.to_owned(),
        };
        self.published_generation.remove(&label);
        self.published_slices.remove(&label);
        self.driver_info.remove(&ResourceDriverLabels {
            resource: resource.to_owned(),
            driver: driver.to_owned(),
        });
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
