//! The object store: the [`State`] of every kind behind one lock (the collections themselves live
//! in [`crate::collection`]), the reads (get, list, opening a watch from the current state or from
//! a resourceVersion), compaction, the server's configuration (served version, feature gates
//! turned off), the request counters, and a signal after every write that tests wait on.
//!
//! Every write runs under one lock: it checks the request against the stored object (existence,
//! resourceVersion, preconditions), runs the kind's admission step, stamps the server-owned
//! metadata (`uid`, `resourceVersion`, `creationTimestamp`, `generation`) and records the change
//! (the writes live in [`writes`], the ResourceClaim status writes in [`claim_status`]).

mod claim_status;
mod writes;

use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::Resource;
use k8s_openapi::api::resource::v1::ResourceSlice;
use tokio::sync::{broadcast, watch};

use crate::admission::{AdmissionPolicy, ServerConfig};
use crate::collection::{Change, ChangeKind, State};
use crate::identity::now;
use crate::kinds::StoredKind;
use crate::pool_history::PoolHistory;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::stats::Stats;
use crate::status::ApiError;

/// Which objects a list, watch or collection delete is about.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    /// `None`: all namespaces (and cluster-scoped kinds).
    pub(crate) namespace: Option<String>,
    pub(crate) fields: FieldSelector,
    pub(crate) labels: LabelSelector,
}

impl Filter {
    /// Whether `object` is selected.
    pub(crate) fn matches<K: StoredKind>(&self, object: &K) -> bool {
        let meta = object.metadata();
        if let Some(ns) = &self.namespace
            && meta.namespace.as_deref().unwrap_or("") != ns
        {
            return false;
        }
        self.fields.matches(|key| object.field_value(key))
            && self.labels.matches(meta.labels.as_ref())
    }
}

/// `metadata.preconditions` of a delete.
#[derive(Debug, Clone, Default)]
pub(crate) struct Preconditions {
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchFrom {
    /// Synthetic ADDED events for the current objects, then live changes.
    CurrentState,
    /// Changes after this resourceVersion.
    After(u64),
}

/// An opened watch: the events to send first, then the live feed.
pub(crate) struct WatchStart<K> {
    pub(crate) backlog: Vec<Arc<Change<K>>>,
    pub(crate) live: broadcast::Receiver<Arc<Change<K>>>,
    /// The resourceVersion the backlog brings the watcher to.
    pub(crate) resource_version: u64,
}

/// The resourceVersion of an empty store. Never 0: a list answered with
/// "0" would make a client's watch start "from any state", and a change
/// between its list and its watch would be lost (a real server never
/// answers "0" either).
pub(crate) const FIRST_RESOURCE_VERSION: u64 = 1;

/// The store shared by the HTTP handlers and the test-facing [`crate::FakeApiServer`] methods.
pub(crate) struct Store {
    state: Mutex<State>,
    /// The resourceVersion after the latest write; `wait_for_slices` waits on it.
    latest: watch::Sender<u64>,
    config: Mutex<ServerConfig>,
    pub(crate) stats: Mutex<Stats>,
    /// The device sets of each node's pool, change by change.
    pub(crate) pool_history: Mutex<PoolHistory>,
    /// The core/v1 Events posted.
    pub(crate) events: crate::events::EventLog,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// An empty store at resourceVersion [`FIRST_RESOURCE_VERSION`].
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State {
                resource_version: FIRST_RESOURCE_VERSION,
                ..State::default()
            }),
            latest: watch::channel(FIRST_RESOURCE_VERSION).0,
            config: Mutex::new(ServerConfig::default()),
            stats: Mutex::new(Stats::default()),
            pool_history: Mutex::new(PoolHistory::default()),
            events: crate::events::EventLog::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data: every write checks before it mutates.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the server's configuration; later writes follow it.
    pub(crate) fn configure(&self, change: impl FnOnce(&mut ServerConfig)) {
        change(&mut self.config.lock().unwrap_or_else(|p| p.into_inner()));
    }

    /// The server's configuration now.
    pub(crate) fn config(&self) -> ServerConfig {
        *self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn policy(&self) -> AdmissionPolicy {
        AdmissionPolicy::new(self.config(), now())
    }

    /// A receiver that sees the resourceVersion after every write.
    pub(crate) fn subscribe_writes(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    fn next_version(&self, state: &mut State) -> u64 {
        state.resource_version += 1;
        state.resource_version
    }

    /// Wakes what waits on writes; after a ResourceSlice write, notes the
    /// pools' device sets first.
    fn announce<K: StoredKind>(&self, version: u64) {
        if K::KIND == ResourceSlice::KIND {
            self.note_pools();
        }
        self.latest.send_replace(version);
    }

    /// Notes each pool's device set in the pool history.
    fn note_pools(&self) {
        // Listed under the history's lock: a later write's list is never
        // observed before an earlier one's.
        let mut history = self.pool_history.lock().unwrap_or_else(|p| p.into_inner());
        let (slices, _) = self.list::<ResourceSlice>(&Filter::default());
        history.observe(&slices);
    }

    /// One object.
    pub(crate) fn get<K: StoredKind>(&self, namespace: &str, name: &str) -> Result<K, ApiError> {
        let state = self.lock();
        K::collection(&state)
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
            .ok_or_else(|| not_found::<K>(name))
    }

    /// The selected objects, ordered by namespace and name, with the list's resourceVersion.
    pub(crate) fn list<K: StoredKind>(&self, filter: &Filter) -> (Vec<K>, u64) {
        let state = self.lock();
        let items = K::collection(&state)
            .objects
            .values()
            .filter(|o| filter.matches(*o))
            .cloned()
            .collect();
        (items, state.resource_version)
    }

    /// Opens a watch: the backlog to send first and the live feed after it.
    pub(crate) fn watch<K: StoredKind>(
        &self,
        filter: &Filter,
        from: WatchFrom,
    ) -> Result<WatchStart<K>, ApiError> {
        let state = self.lock();
        let collection = K::collection(&state);
        let live = collection.events.subscribe();
        let backlog = match from {
            WatchFrom::CurrentState => collection
                .objects
                .values()
                .filter(|o| filter.matches(*o))
                .map(|o| {
                    let resource_version = o
                        .metadata()
                        .resource_version
                        .as_deref()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    Arc::new(Change {
                        kind: ChangeKind::Added,
                        resource_version,
                        object: o.clone(),
                        previous: None,
                    })
                })
                .collect(),
            WatchFrom::After(version) => {
                if version < collection.compacted_through {
                    return Err(ApiError::expired(version, collection.compacted_through));
                }
                collection
                    .history
                    .iter()
                    .filter(|c| c.resource_version > version)
                    .cloned()
                    .collect()
            }
        };
        Ok(WatchStart {
            backlog,
            live,
            resource_version: state.resource_version,
        })
    }

    /// Forgets all change history: watches from any version before now get 410 Expired.
    pub(crate) fn compact(&self) {
        let mut state = self.lock();
        let now = state.resource_version;
        state.slices.forget_history(now);
        state.claims.forget_history(now);
        state.nodes.forget_history(now);
    }
}

/// 404 for `name` of kind `K`.
fn not_found<K: StoredKind>(name: &str) -> ApiError {
    ApiError::not_found(K::URL_PATH_SEGMENT, K::GROUP, name)
}
