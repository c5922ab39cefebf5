//! The Prometheus metric family the device-plugin transport counts: the
//! `ListAndWatch` streams open per resource. Its RPCs and registrations it
//! counts into the kubelet-facing families of
//! [`wdp_kubelet_socket::metrics`], which it shares with the DRA driver.
//! [`DevicePluginMetrics::register`] puts its family in the one registry
//! the host builds.

use std::sync::Arc;

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use wdp_kubelet_socket::KubeletMetrics;
use wdp_resource::ResourceLabel;

/// What the device-plugin transport counts, registered once.
#[derive(Debug)]
pub struct DevicePluginMetrics {
    /// `wasm_device_plugin_list_and_watch_streams`.
    pub streams: Family<ResourceLabel, Gauge>,
    /// The RPC and registration families, registered by their owner.
    pub kubelet: Arc<KubeletMetrics>,
}

impl DevicePluginMetrics {
    /// The stream gauge, registered in `registry` and at zero, beside the
    /// already registered `kubelet` families it counts into too.
    pub fn register(registry: &mut Registry, kubelet: Arc<KubeletMetrics>) -> Arc<Self> {
        let streams = Family::<ResourceLabel, Gauge>::default();
        registry.register(
            "list_and_watch_streams",
            "Open ListAndWatch streams per resource",
            streams.clone(),
        );
        Arc::new(Self { streams, kubelet })
    }

    /// The stream gauge of `resource`.
    pub(crate) fn streams_of(&self, resource: &str) -> Gauge {
        self.streams
            .get_or_create(&ResourceLabel {
                resource: resource.to_owned(),
            })
            .clone()
    }

    /// Drops the stream gauge of a removed resource.
    pub fn forget_resource(&self, resource: &str) {
        self.streams.remove(&ResourceLabel {
            resource: resource.to_owned(),
        });
    }
}
