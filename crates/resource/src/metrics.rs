//! The Prometheus metric families the resource pipeline counts: devices
//! advertised, device IDs allocated, every guest hook call (count,
//! duration, calls running), and devices withheld while a resource moves
//! between kubelet APIs. [`ResourceMetrics::register`] puts them in the
//! one registry the host builds; the other layers register their own
//! families beside them. Names follow Prometheus conventions: the registry's
//! `wasm_device_plugin_` prefix, base units (`_seconds`), and `_total` on
//! counters.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

mod labels;

pub use labels::{GuestLabels, ResourceLabel};
pub(crate) use labels::{GuestResultLabels, HealthLabels};

/// The latency buckets of every duration histogram: 20 µs .. ~40 s. The
/// kubelet RPC and DRA claim histograms of the layers above use the same.
pub fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_02, 2.5, 16))
}

/// The families the resource pipeline counts, registered once.
#[derive(Debug)]
pub struct ResourceMetrics {
    /// `wasm_device_plugin_devices`.
    pub(crate) devices: Family<HealthLabels, Gauge>,
    /// `wasm_device_plugin_allocated_devices_total`.
    pub allocated_devices: Family<ResourceLabel, Counter>,
    /// `wasm_device_plugin_guest_calls_total`.
    pub(crate) guest_calls: Family<GuestResultLabels, Counter>,
    /// `wasm_device_plugin_guest_call_duration_seconds`.
    pub guest_duration: Family<GuestLabels, Histogram>,
    /// `wasm_device_plugin_guest_calls_in_flight`.
    pub guest_calls_in_flight: Family<GuestLabels, Gauge>,
    /// `wasm_device_plugin_devices_withheld`.
    pub devices_withheld: Family<ResourceLabel, Gauge>,
}

impl ResourceMetrics {
    /// The resource pipeline's families, registered in `registry` and at
    /// zero.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let metrics = Self {
            devices: Family::default(),
            allocated_devices: Family::default(),
            guest_calls: Family::default(),
            guest_duration: Family::new_with_constructor(latency_histogram as fn() -> _),
            guest_calls_in_flight: Family::default(),
            devices_withheld: Family::default(),
        };
        registry.register(
            "devices",
            "Devices advertised to the kubelet, by resource and health",
            metrics.devices.clone(),
        );
        registry.register(
            "allocated_devices",
            "Device IDs handed to containers through Allocate",
            metrics.allocated_devices.clone(),
        );
        registry.register(
            "guest_calls",
            "Guest hook calls by result: ok, trap, timeout, out-of-memory, guest-error, invalid-answer",
            metrics.guest_calls.clone(),
        );
        registry.register(
            "guest_call_duration_seconds",
            "Time of a guest hook call, instantiation included",
            metrics.guest_duration.clone(),
        );
        registry.register(
            "guest_calls_in_flight",
            "Guest hook calls running right now",
            metrics.guest_calls_in_flight.clone(),
        );
        registry.register(
            "devices_withheld",
            "Devices not offered while a resource moves between the device-plugin API and DRA: held through the other API, or all while that is unknown",
            metrics.devices_withheld.clone(),
        );
        Arc::new(metrics)
    }

    /// Families registered nowhere: for a resource loaded only to be
    /// checked (`wasm-device-plugin check`) or tested.
    pub fn unregistered() -> Arc<Self> {
        Self::register(&mut Registry::default())
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

    /// Counts `devices` device IDs handed to a container of `resource`.
    pub fn allocated(&self, resource: &str, devices: usize) {
        self.allocated_devices
            .get_or_create(&ResourceLabel {
                resource: resource.to_owned(),
            })
            .inc_by(devices as u64);
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

    /// Sets how many devices of `resource` are withheld.
    pub fn set_withheld(&self, resource: &str, withheld: usize) {
        let label = ResourceLabel {
            resource: resource.to_owned(),
        };
        if withheld == 0 {
            self.devices_withheld.remove(&label);
        } else {
            self.devices_withheld
                .get_or_create(&label)
                .set(withheld as i64);
        }
    }

    /// Drops the per-resource device gauges of a removed resource.
    pub fn forget_resource(&self, resource: &str) {
        self.devices_withheld.remove(&ResourceLabel {
            resource: resource.to_owned(),
        });
        for health in ["healthy", "unhealthy"] {
            self.devices.remove(&HealthLabels {
                resource: resource.to_owned(),
                health: health.to_owned(),
            });
        }
    }
}
