//! The host's Prometheus metrics: the one registry every layer registers
//! its families into ([`Metrics`], which the binary's `/metrics` endpoint
//! encodes), and the families the host counts itself ([`HostMetrics`]:
//! reloads, whether the configuration is valid, the configuration set
//! served, kubelet restarts its folder watcher notices). The layers below
//! own the rest: `wdp-resource` the devices and guest calls,
//! `wdp-kubelet-socket` the kubelet RPCs and registrations both protocols
//! count, `wdp-device-plugin` the `ListAndWatch` streams and
//! `wdp-dra-driver` the `dra_*` families.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use wdp_device_plugin::DevicePluginMetrics;
use wdp_dra_driver::DraMetrics;
use wdp_kubelet_socket::KubeletMetrics;
use wdp_resource::ResourceMetrics;

/// Label set: `success` or `failure`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// The outcome.
    pub result: String,
}

/// Label set: a configuration set and the digest of its files.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfigSetLabels {
    /// The set's name (`default` for the top-level one).
    pub set: String,
    /// `sha256:<hex>` of its files.
    pub digest: String,
}

/// Label set: a resource and a source of what the node holds that cannot
/// be read.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UnreadableLabels {
    /// The resource whose devices are withheld meanwhile.
    pub resource: String,
    /// `switch-record`, `dra-checkpoint`, `kubelet-checkpoint` or
    /// `pod-resources`.
    pub source: String,
}

/// The families the host counts, registered once.
#[derive(Debug)]
pub struct HostMetrics {
    /// `wasm_device_plugin_reloads_total`.
    pub reloads: Family<ResultLabel, Counter>,
    /// `wasm_device_plugin_config_valid`.
    pub config_valid: Gauge,
    /// `wasm_device_plugin_config_set_info`: 1 for the configuration set
    /// being served, by set name and digest.
    pub config_set_info: Family<ConfigSetLabels, Gauge>,
    /// `wasm_device_plugin_kubelet_restarts_total`.
    pub kubelet_restarts: Counter,
    /// `wasm_device_plugin_holdings_unreadable`: 1 while a source of which
    /// devices the other kubelet API holds cannot be read (the resource's
    /// devices are withheld meanwhile), by resource and source.
    pub holdings_unreadable: Family<UnreadableLabels, Gauge>,
    /// Per configuration set, the key of its latest refusal
    /// (the `refusal` module's key) since it last loaded: the same refusal
    /// again is not counted again.
    refusals: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
}

impl HostMetrics {
    /// The host's families, registered in `registry` and at zero.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reloads: Family::default(),
            config_valid: Gauge::default(),
            config_set_info: Family::default(),
            kubelet_restarts: Counter::default(),
            holdings_unreadable: Family::default(),
            refusals: std::sync::Mutex::default(),
        };
        registry.register(
            "reloads",
            "Configuration reloads by result (success, failure)",
            metrics.reloads.clone(),
        );
        registry.register(
            "config_valid",
            "1 when the configuration directory's latest content was applied, 0 when it was refused",
            metrics.config_valid.clone(),
        );
        registry.register(
            "config_set_info",
            "1 for the configuration set this node serves (picked by its node label, else default), by set and the digest of its files",
            metrics.config_set_info.clone(),
        );
        registry.register(
            "kubelet_restarts",
            "Kubelet restarts noticed (kubelet.sock created again or our socket removed)",
            metrics.kubelet_restarts.clone(),
        );
        registry.register(
            "holdings_unreadable",
            "1 while a source of which devices the other kubelet API holds (switch record, DRA checkpoint, the kubelet's device-manager checkpoint, PodResources) cannot be read; the resource's devices are withheld meanwhile",
            metrics.holdings_unreadable.clone(),
        );
        metrics
    }

    /// Sets whether `source` of `resource`'s holdings is unreadable now.
    pub fn set_holdings_unreadable(&self, resource: &str, source: &str, unreadable: bool) {
        self.holdings_unreadable
            .get_or_create(&UnreadableLabels {
                resource: resource.to_owned(),
                source: source.to_owned(),
            })
            .set(i64::from(unreadable));
    }

    /// Counts one reload and sets `config_valid`; a success forgets the
    /// refusals seen so far.
    pub fn reload(&self, ok: bool) {
        if ok {
            self.refusals
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clear();
        }
        self.reloads
            .get_or_create(&ResultLabel {
                result: if ok { "success" } else { "failure" }.to_owned(),
            })
            .inc();
        self.config_valid.set(i64::from(ok));
    }

    /// A refusal of configuration set `set`, keyed by what was refused
    /// (`key`: the content and the error): counted as a failed reload
    /// unless it is the set's latest refusal already. Sets `config_valid`
    /// to 0 either way; answers whether it was counted (and is to be
    /// logged).
    pub fn refused(&self, set: &str, key: &str) -> bool {
        self.config_valid.set(0);
        let mut refusals = self
            .refusals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if refusals.get(set).is_some_and(|last| last == key) {
            return false;
        }
        refusals.insert(set.to_owned(), key.to_owned());
        self.reloads
            .get_or_create(&ResultLabel {
                result: "failure".to_owned(),
            })
            .inc();
        true
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
}

/// Every metric of the process: one registry, every layer's families
/// registered in it once, layer by layer from the bottom.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// The resource pipeline's: devices, allocations, guest calls.
    pub resource: Arc<ResourceMetrics>,
    /// Both kubelet protocols': RPCs and registrations.
    pub kubelet: Arc<KubeletMetrics>,
    /// The host's own: reloads, configuration, kubelet restarts.
    pub host: HostMetrics,
    /// The device-plugin transport's: `ListAndWatch` streams.
    pub device_plugin: Arc<DevicePluginMetrics>,
    /// The DRA driver's: claims and slice publishing.
    pub dra: Arc<DraMetrics>,
}

impl Metrics {
    /// Every metric, registered and at zero.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("wasm_device_plugin");
        let resource = ResourceMetrics::register(&mut registry);
        let kubelet = KubeletMetrics::register(&mut registry, wdp_resource::latency_histogram);
        let host = HostMetrics::register(&mut registry);
        let device_plugin = DevicePluginMetrics::register(&mut registry, kubelet.clone());
        let dra = DraMetrics::register(&mut registry, kubelet.clone());
        Arc::new(Self {
            registry,
            resource,
            kubelet,
            host,
            device_plugin,
            dra,
        })
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Drops the per-resource series of a resource that left the
    /// configuration.
    pub fn forget_resource(&self, resource: &str) {
        self.resource.forget_resource(resource);
        self.device_plugin.forget_resource(resource);
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
