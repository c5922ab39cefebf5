//! An in-process fake Kubernetes API server for the DRA mode's tests and demo.
//!
//! [`FakeApiServer`] listens on plain HTTP on `127.0.0.1` and serves what a DRA driver built on
//! kube-rs uses: `resource.k8s.io/v1` ResourceSlices (get, list, watch, create, replace, merge
//! and JSON patch, delete, delete-collection with field and label selectors), ResourceClaims (get, list,
//! watch, and the `status` subresource: get, replace, patch), core/v1 Nodes (get, list, watch,
//! patch) and Events (create), plus `/version`. It keeps the API server's rules that a client can trip over: one global
//! resourceVersion, 409 on stale versions and existing names, 404/410 `Status` answers,
//! server-owned metadata, and the ResourceSlice and ResourceClaim status validation of the served
//! version (1.34 by default, [`FakeApiServer::set_served_minor`]) with field paths in 422
//! `Invalid` answers. Tests drive the other side: they read the slices and claims, wait for the
//! slices to reach a state, put claims and nodes, allocate the claim the scheduler writes for an
//! extended-resource request (KEP-5004, [`FakeApiServer::allocate_extended_resource`]), wipe a node's slices as the kubelet does, and
//! simulate outages (refusing, restart), an overloaded server (writes throttled with 429 or 5xx
//! and `Retry-After`) and servers with DRA feature gates off (device taints, partitionable
//! devices, consumable capacity).
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! let server = wdp_fake_apiserver::FakeApiServer::start().await?;
//! server.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//! // Point kube::Config::from_custom_kubeconfig at it, then watch server.slices().
//! # Ok(()) }
//! ```

mod admission;
mod app_state;
mod claim_status;
mod collection;
mod events;
mod extended_resource;
mod faults;
mod identity;
mod kinds;
mod listener;
mod nodes;
mod patch;
mod patch_request;
mod pool_history;
mod query;
mod reads;
mod request;
mod responses;
mod routes;
mod selectors;
mod stats;
mod status;
mod store;
mod throttle;
mod validation;
mod wait;
mod watch;
mod writes;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use extended_resource::{EXTENDED_RESOURCE_CLAIM_ANNOTATION, ExtendedResourceRequest};
pub use k8s_openapi::api::core::v1::{Event, Node};
pub use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
pub use stats::{RejectedWrite, Stats};
pub use throttle::{Throttle, ThrottleBody, WriteAttempt};
pub use wait::Timeout;

use faults::Faults;
use listener::Generation;
use store::{Filter, Store};
use throttle::Throttling;

/// A fake Kubernetes API server running in this process; dropping it stops it.
#[derive(Debug)]
pub struct FakeApiServer {
    store: Arc<Store>,
    refusing: tokio::sync::watch::Sender<bool>,
    throttling: Arc<Throttling>,
    faults: Arc<Faults>,
    /// `None` only while [`FakeApiServer::restart`] swaps generations.
    generation: Option<Generation>,
    address: SocketAddr,
}

impl FakeApiServer {
    /// Starts serving plain HTTP on `127.0.0.1` on a free port. Needs a Tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        let store = Arc::new(Store::new());
        let refusing = tokio::sync::watch::channel(false).0;
        let throttling = Arc::new(Throttling::default());
        let faults = Arc::new(Faults::default());
        let generation = Generation::start(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            store.clone(),
            refusing.subscribe(),
            throttling.clone(),
            faults.clone(),
        )
        .await?;
        let address = generation.address;
        Ok(Self {
            store,
            refusing,
            throttling,
            faults,
            generation: Some(generation),
            address,
        })
    }

    /// The base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Writes a kubeconfig whose only cluster is this server (no auth, one context, set current).
    pub fn write_kubeconfig(&self, path: &Path) -> std::io::Result<()> {
        let kubeconfig = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: wdp-fake\n  \
               cluster:\n    \
                 server: {url}\n\
             users:\n\
             - name: wdp-fake\n  \
               user: {{}}\n\
             contexts:\n\
             - name: wdp-fake\n  \
               context:\n    \
                 cluster: wdp-fake\n    \
                 user: wdp-fake\n\
             current-context: wdp-fake\n\
             preferences: {{}}\n",
            url = self.url()
        );
        std::fs::write(path, kubeconfig)
    }

    /// Like [`FakeApiServer::write_kubeconfig`], with the user authenticating
    /// by the bearer token in `token_file` (re-read by the client as a
    /// projected service-account token is).
    pub fn write_kubeconfig_with_token_file(
        &self,
        path: &Path,
        token_file: &Path,
    ) -> std::io::Result<()> {
        self.write_kubeconfig(path)?;
        let text = std::fs::read_to_string(path)?.replace(
            "user: {}",
            &format!("user:\n    tokenFile: {}", token_file.display()),
        );
        std::fs::write(path, text)
    }

    /// From now on only requests bearing one of `tokens` pass, others get
    /// 401 `Unauthorized`; `None` accepts any request again.
    pub fn require_bearer_tokens(&self, tokens: Option<&[&str]>) {
        self.faults.require_tokens(tokens);
    }

    /// Every distinct bearer token received so far, in order of first use.
    pub fn bearer_tokens_seen(&self) -> Vec<String> {
        self.faults.tokens_seen()
    }

    /// While on, every ResourceClaim read is answered 200 with a body that
    /// is not JSON (a proxy's error page).
    pub fn answer_claim_reads_with_garbage(&self, on: bool) {
        self.faults.set_garbage_claims(on);
    }

    /// While on, every ResourceClaim status write (`PUT` or `PATCH` of
    /// `…/resourceclaims/<name>/status`) is held and never answered, as by
    /// a server that hangs mid-request; reads are answered.
    pub fn hang_claim_status_writes(&self, on: bool) {
        self.faults.set_hung_status_writes(on);
    }

    /// Every ResourceSlice, ordered by name.
    pub fn slices(&self) -> Vec<ResourceSlice> {
        self.store.list::<ResourceSlice>(&Filter::default()).0
    }

    /// The ResourceSlices with `spec.nodeName == node` and `spec.driver == driver`, by name.
    pub fn slices_of(&self, node: &str, driver: &str) -> Vec<ResourceSlice> {
        self.slices()
            .into_iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node) && s.spec.driver == driver)
            .collect()
    }

    /// The device sets the pool of `node` and `driver` showed since the
    /// server started, one entry per change, in order (an empty set when
    /// all its slices were gone): a pool replaced once by a handover shows
    /// one new entry.
    pub fn pool_history(&self, node: &str, driver: &str) -> Vec<Vec<String>> {
        self.store
            .pool_history
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .of(node, driver)
    }

    /// Waits until `pred` holds for the current slices (checked now and after every write).
    pub async fn wait_for_slices<F: Fn(&[ResourceSlice]) -> bool>(
        &self,
        pred: F,
        timeout: Duration,
    ) -> Result<Vec<ResourceSlice>, Timeout> {
        wait::slices_until(&self.store, pred, timeout).await
    }

    /// Deletes the slices of `node` (and of `driver` when given), as the kubelet does at start
    /// with a DeleteCollection; watchers get DELETED events. Returns how many were deleted.
    pub fn wipe_node_slices(&self, node: &str, driver: Option<&str>) -> usize {
        let mut selector = format!("spec.nodeName={node}");
        if let Some(driver) = driver {
            selector.push_str(&format!(",spec.driver={driver}"));
        }
        let fields = selectors::FieldSelector::parse(&selector, &["spec.nodeName", "spec.driver"])
            .expect("the selector is built from the two indexed fields");
        let filter = Filter {
            fields,
            ..Filter::default()
        };
        self.store.delete_collection::<ResourceSlice>(&filter).len()
    }

    /// Creates or replaces a ResourceClaim; fills `uid` (when empty), `resourceVersion`,
    /// `creationTimestamp` and `generation`. Returns the stored claim.
    pub fn put_claim(&self, claim: ResourceClaim) -> ResourceClaim {
        self.store.put(claim)
    }

    /// The ResourceClaim `namespace/name` as stored, if it exists.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<ResourceClaim> {
        self.store.get(namespace, name).ok()
    }

    /// Every ResourceClaim, ordered by namespace and name.
    pub fn claims(&self) -> Vec<ResourceClaim> {
        self.store.list::<ResourceClaim>(&Filter::default()).0
    }

    /// Plays the scheduler for a pod asking for an extended resource that
    /// DRA serves (KEP-5004): allocates free devices of the node's slices
    /// of the request's driver (none another claim holds) and stores the
    /// claim the scheduler writes at PreBind (see the module
    /// `extended_resource`); an error when not enough devices are free.
    pub fn allocate_extended_resource(
        &self,
        request: &ExtendedResourceRequest,
    ) -> Result<ResourceClaim, String> {
        let slices = self.slices_of(&request.node, &request.driver);
        let claims = self.claims();
        let suffix = claims.len() as u64;
        let claim = extended_resource::claim_for(request, &slices, &claims, suffix)?;
        Ok(self.put_claim(claim))
    }

    /// Deletes a ResourceClaim; whether it existed.
    pub fn delete_claim(&self, namespace: &str, name: &str) -> bool {
        self.store.remove::<ResourceClaim>(namespace, name)
    }

    /// Waits until `pred` holds for the labels of Node `name` (checked now
    /// and after every write); the labels last seen on timeout.
    pub async fn wait_for_node_labels<
        F: Fn(&std::collections::BTreeMap<String, String>) -> bool,
    >(
        &self,
        name: &str,
        pred: F,
        timeout: Duration,
    ) -> Result<
        std::collections::BTreeMap<String, String>,
        std::collections::BTreeMap<String, String>,
    > {
        wait::node_labels_until(&self.store, name, pred, timeout).await
    }

    /// Every core/v1 Event posted, in order.
    pub fn events(&self) -> Vec<Event> {
        self.store.events.all()
    }

    /// Waits until `pred` holds for the Events posted (checked now and
    /// after each post); the Events last seen on timeout.
    pub async fn wait_for_events<F: Fn(&[Event]) -> bool>(
        &self,
        pred: F,
        timeout: Duration,
    ) -> Result<Vec<Event>, Vec<Event>> {
        self.store.events.until(pred, timeout).await
    }

    /// Creates or replaces a Node; returns the stored node.
    pub fn put_node(&self, node: Node) -> Node {
        self.store.put(node)
    }

    /// While true every request gets 503 Service Unavailable and open watches end.
    pub fn set_refusing(&self, refusing: bool) {
        self.refusing.send_replace(refusing);
    }

    /// Answers the next `throttle.count` ResourceSlice writes (create, replace, patch, delete)
    /// with `throttle.code` and a `Retry-After` header, as an overloaded server does; reads and
    /// watches pass. Replaces a throttle still in force. Throttled writes are not in
    /// [`Stats::rejected`]; [`FakeApiServer::write_attempts`] lists them.
    pub fn throttle_writes(&self, throttle: Throttle) {
        self.throttling.set(throttle);
    }

    /// Every ResourceSlice write request received over HTTP, throttled ones included, in order
    /// of arrival, with its arrival time and answer (refused ones while
    /// [`FakeApiServer::set_refusing`] is on are not listed).
    pub fn write_attempts(&self) -> Vec<WriteAttempt> {
        self.throttling.attempts()
    }

    /// Serves Kubernetes `1.<minor>` from now on: `/version` reports it and ResourceSlice
    /// validation follows its rules (34 until changed). 1.34 keeps counter sets in the slice of
    /// the devices consuming them and allows 128 devices and 4 taints per device; 1.35 and later
    /// put counter sets in slices of their own (at most 8 per slice, 32 counters each), allow 2
    /// counter consumptions per device, 16 taints, and 64 devices when any device has taints or
    /// consumes counters. References between slices of a pool are not checked, as the real
    /// server does not check them.
    ///
    /// # Panics
    ///
    /// When `minor` is below 34: `resource.k8s.io/v1` is served from 1.34 on.
    pub fn set_served_minor(&self, minor: u32) {
        assert!(
            minor >= admission::OLDEST_MINOR,
            "resource.k8s.io/v1 is served from 1.{} on, not by 1.{minor}",
            admission::OLDEST_MINOR
        );
        self.store.configure(|config| config.minor = minor);
    }

    /// The Kubernetes minor version served (34 unless [`FakeApiServer::set_served_minor`]
    /// changed it).
    pub fn served_minor(&self) -> u32 {
        self.store.config().minor
    }

    /// Simulates an API server with DRADeviceTaints off: `spec.devices[].taints` are silently
    /// dropped from created slices and from updates of slices that have no taints yet.
    pub fn set_taints_dropped(&self, dropped: bool) {
        self.store
            .configure(|config| config.disabled.device_taints = dropped);
    }

    /// Simulates an API server with DRAPartitionableDevices off: `spec.sharedCounters`,
    /// `spec.perDeviceNodeSelection` and the devices' `consumesCounters`, `nodeName`,
    /// `nodeSelector` and `allNodes` are silently dropped from created slices and from updates
    /// of slices that use none of them yet (a stored slice using them keeps them, as on the real
    /// server).
    pub fn set_partitions_dropped(&self, dropped: bool) {
        self.store
            .configure(|config| config.disabled.partitionable_devices = dropped);
    }

    /// Simulates an API server with DRAConsumableCapacity off: the devices'
    /// `allowMultipleAllocations` and `capacity[*].requestPolicy` are silently dropped from
    /// created slices and from updates of slices that use neither yet.
    pub fn set_consumable_capacity_dropped(&self, dropped: bool) {
        self.store
            .configure(|config| config.disabled.consumable_capacity = dropped);
    }

    /// Forgets the change history, so that watches resuming from an earlier resourceVersion get
    /// a 410 `Expired` event (as after an etcd compaction).
    pub fn compact(&self) {
        self.store.compact();
    }

    /// Drops every connection (watches included), then listens again on the same port. The
    /// stored objects and resourceVersions are kept.
    pub async fn restart(&mut self) -> std::io::Result<()> {
        if let Some(generation) = self.generation.take() {
            generation.stop().await;
        }
        let generation = Generation::start(
            self.address,
            self.store.clone(),
            self.refusing.subscribe(),
            self.throttling.clone(),
            self.faults.clone(),
        )
        .await?;
        self.generation = Some(generation);
        Ok(())
    }

    /// Counts of requests and of accepted and rejected ResourceSlice and ResourceClaim status
    /// writes so far.
    pub fn stats(&self) -> Stats {
        self.store
            .stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(generation) = &self.generation {
            generation.signal_stop();
        }
    }
}
