//! The object store: one global resourceVersion counter, the objects of each kind, and per kind
//! a bounded history of changes that watches resume from, plus a broadcast of new changes.
//!
//! Every write runs under one lock: it checks the request against the stored object (existence,
//! resourceVersion, preconditions), runs the kind's admission step, stamps the server-owned
//! metadata (`uid`, `resourceVersion`, `creationTimestamp`, `generation`) and records the change.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::{broadcast, watch};

use crate::identity::{generated_name_suffix, new_uid, now};
use crate::kinds::{AdmissionPolicy, StoredKind};
use crate::selectors::{FieldSelector, LabelSelector};
use crate::stats::Stats;
use crate::status::{ApiError, FieldError, FieldErrorKind};
use crate::validation::dns_subdomain_problem;

/// How many changes per kind a watch can resume across.
const HISTORY_LEN: usize = 4096;
/// How many changes a live watch may fall behind before it is ended.
const BROADCAST_LEN: usize = 1024;

/// `(namespace, name)`; the namespace is "" for cluster-scoped kinds.
pub(crate) type ObjectKey = (String, String);

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One recorded change of an object.
#[derive(Debug)]
pub(crate) struct Change<K> {
    pub(crate) kind: ChangeKind,
    pub(crate) resource_version: u64,
    /// The object after the change (for deletions: as it was, with the deletion's version).
    pub(crate) object: K,
    /// The object before a modification, so that a filtered watch can tell enter from leave.
    pub(crate) previous: Option<K>,
}

/// The objects of one kind with their change history.
pub(crate) struct Collection<K> {
    objects: BTreeMap<ObjectKey, K>,
    history: VecDeque<Arc<Change<K>>>,
    /// Watches must start at or after this version; older changes are gone.
    compacted_through: u64,
    events: broadcast::Sender<Arc<Change<K>>>,
}

impl<K> Default for Collection<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            compacted_through: 0,
            events: broadcast::channel(BROADCAST_LEN).0,
        }
    }
}

impl<K: StoredKind> Collection<K> {
    /// Drops the history up to `version`: watches from before it get 410 Expired.
    fn forget_history(&mut self, version: u64) {
        self.history.clear();
        self.compacted_through = version;
    }

    fn record(&mut self, change: Change<K>) {
        let change = Arc::new(change);
        if self.history.len() == HISTORY_LEN
            && let Some(dropped) = self.history.pop_front()
        {
            self.compacted_through = dropped.resource_version;
        }
        self.history.push_back(change.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(change);
    }
}

/// Everything stored, under one lock.
#[derive(Default)]
pub(crate) struct State {
    resource_version: u64,
    pub(crate) slices: Collection<ResourceSlice>,
    pub(crate) claims: Collection<ResourceClaim>,
    pub(crate) nodes: Collection<Node>,
}

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

/// The store shared by the HTTP handlers and the test-facing [`crate::FakeApiServer`] methods.
pub(crate) struct Store {
    state: Mutex<State>,
    /// The resourceVersion after the latest write; `wait_for_slices` waits on it.
    latest: watch::Sender<u64>,
    taints_dropped: Mutex<bool>,
    pub(crate) stats: Mutex<Stats>,
}

impl Store {
    /// An empty store at resourceVersion 0.
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(State::default()),
            latest: watch::channel(0).0,
            taints_dropped: Mutex::new(false),
            stats: Mutex::new(Stats::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data: every write checks before it mutates.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sets whether device taints are dropped on writes.
    pub(crate) fn set_taints_dropped(&self, dropped: bool) {
        *self
            .taints_dropped
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = dropped;
    }

    fn policy(&self) -> AdmissionPolicy {
        AdmissionPolicy {
            taints_dropped: *self
                .taints_dropped
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
            now: now(),
        }
    }

    /// A receiver that sees the resourceVersion after every write.
    pub(crate) fn subscribe_writes(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }

    fn next_version(&self, state: &mut State) -> u64 {
        state.resource_version += 1;
        state.resource_version
    }

    fn announce(&self, version: u64) {
        self.latest.send_replace(version);
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

    /// Creates `object` in `namespace` ("" for cluster-scoped kinds); `dry_run` checks only.
    pub(crate) fn create<K: StoredKind>(
        &self,
        namespace: &str,
        mut object: K,
        dry_run: bool,
    ) -> Result<K, ApiError> {
        let policy = self.policy();
        let mut state = self.lock();
        let meta = object.metadata_mut();
        if meta
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())
        {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        check_namespace(meta.namespace.as_deref(), namespace)?;
        meta.namespace = (!namespace.is_empty()).then(|| namespace.to_string());
        let name = match (meta.name.as_deref(), meta.generate_name.as_deref()) {
            (Some(name), _) if !name.is_empty() => name.to_string(),
            (_, Some(prefix)) if !prefix.is_empty() => loop {
                let candidate = format!("{prefix}{}", generated_name_suffix());
                let key = (namespace.to_string(), candidate.clone());
                if !K::collection(&state).objects.contains_key(&key) {
                    break candidate;
                }
            },
            _ => {
                return Err(invalid::<K>(
                    "",
                    vec![FieldError::new(
                        "metadata.name",
                        FieldErrorKind::Required {
                            detail: "name or generateName is required".into(),
                        },
                    )],
                ));
            }
        };
        meta.name = Some(name.clone());
        let mut errors = name_errors(&name);
        if let Err(more) = object.admit(None, &policy) {
            errors.extend(more);
        }
        if !errors.is_empty() {
            return Err(invalid::<K>(&name, errors));
        }
        let key = (namespace.to_string(), name.clone());
        if K::collection(&state).objects.contains_key(&key) {
            return Err(ApiError::already_exists(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                &name,
            ));
        }
        let version = if dry_run {
            state.resource_version
        } else {
            self.next_version(&mut state)
        };
        let meta = object.metadata_mut();
        meta.uid = Some(new_uid());
        meta.creation_timestamp = Some(Time(policy.now));
        meta.resource_version = (!dry_run).then(|| version.to_string());
        meta.generation = K::TRACKS_GENERATION.then_some(1);
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        if dry_run {
            return Ok(object);
        }
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind: ChangeKind::Added,
            resource_version: version,
            object: object.clone(),
            previous: None,
        });
        drop(state);
        self.announce(version);
        Ok(object)
    }

    /// Replaces the object `namespace/name` with `object` (PUT semantics).
    pub(crate) fn replace<K: StoredKind>(
        &self,
        namespace: &str,
        name: &str,
        mut object: K,
        dry_run: bool,
    ) -> Result<K, ApiError> {
        let policy = self.policy();
        let mut state = self.lock();
        let meta = object.metadata_mut();
        check_namespace(meta.namespace.as_deref(), namespace)?;
        if meta.name.as_deref() != Some(name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta.name.as_deref().unwrap_or("")
            )));
        }
        let key = (namespace.to_string(), name.to_string());
        let old = K::collection(&state)
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| not_found::<K>(name))?;
        let old_meta = old.metadata();
        if let Some(rv) = meta.resource_version.as_deref().filter(|rv| !rv.is_empty())
            && Some(rv) != old_meta.resource_version.as_deref()
        {
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                STALE,
            ));
        }
        if let Some(uid) = meta.uid.as_deref().filter(|u| !u.is_empty())
            && Some(uid) != old_meta.uid.as_deref()
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                old_meta.uid.as_deref().unwrap_or("")
            );
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                &why,
            ));
        }
        meta.namespace = old_meta.namespace.clone();
        meta.uid = old_meta.uid.clone();
        meta.creation_timestamp = old_meta.creation_timestamp.clone();
        meta.resource_version = old_meta.resource_version.clone();
        meta.generation = old_meta.generation;
        meta.generate_name = meta
            .generate_name
            .take()
            .or_else(|| old_meta.generate_name.clone());
        meta.deletion_timestamp = old_meta.deletion_timestamp.clone();
        if let Err(errors) = object.admit(Some(&old), &policy) {
            return Err(invalid::<K>(name, errors));
        }
        if K::TRACKS_GENERATION && object.spec_differs(&old) {
            object.metadata_mut().generation = Some(old.metadata().generation.unwrap_or(0) + 1);
        }
        if object == old || dry_run {
            // A no-op update writes nothing and keeps the resourceVersion, like the real server.
            return Ok(object);
        }
        let version = self.next_version(&mut state);
        object.metadata_mut().resource_version = Some(version.to_string());
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind: ChangeKind::Modified,
            resource_version: version,
            object: object.clone(),
            previous: Some(old),
        });
        drop(state);
        self.announce(version);
        Ok(object)
    }

    /// Deletes `namespace/name` (immediately: the fake has no finalizers) and returns it.
    pub(crate) fn delete<K: StoredKind>(
        &self,
        namespace: &str,
        name: &str,
        preconditions: &Preconditions,
    ) -> Result<K, ApiError> {
        let mut state = self.lock();
        let key = (namespace.to_string(), name.to_string());
        let current = K::collection(&state)
            .objects
            .get(&key)
            .ok_or_else(|| not_found::<K>(name))?;
        let meta = current.metadata();
        if let Some(uid) = &preconditions.uid
            && Some(uid.as_str()) != meta.uid.as_deref()
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta.uid.as_deref().unwrap_or("")
            );
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                &why,
            ));
        }
        if let Some(rv) = &preconditions.resource_version
            && Some(rv.as_str()) != meta.resource_version.as_deref()
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta.resource_version.as_deref().unwrap_or("")
            );
            return Err(ApiError::conflict(
                K::URL_PATH_SEGMENT,
                K::GROUP,
                name,
                &why,
            ));
        }
        let removed = self.remove_locked::<K>(&mut state, &key);
        let version = state.resource_version;
        drop(state);
        self.announce(version);
        Ok(removed)
    }

    /// Deletes every selected object; returns them in key order.
    pub(crate) fn delete_collection<K: StoredKind>(&self, filter: &Filter) -> Vec<K> {
        let mut state = self.lock();
        let keys: Vec<ObjectKey> = K::collection(&state)
            .objects
            .iter()
            .filter(|(_, o)| filter.matches(*o))
            .map(|(k, _)| k.clone())
            .collect();
        let removed: Vec<K> = keys
            .iter()
            .map(|key| self.remove_locked::<K>(&mut state, key))
            .collect();
        let version = state.resource_version;
        drop(state);
        if !removed.is_empty() {
            self.announce(version);
        }
        removed
    }

    fn remove_locked<K: StoredKind>(&self, state: &mut State, key: &ObjectKey) -> K {
        let version = self.next_version(state);
        let collection = K::collection_mut(state);
        let mut object = collection
            .objects
            .remove(key)
            .expect("the caller checked the key under the same lock");
        object.metadata_mut().resource_version = Some(version.to_string());
        collection.record(Change {
            kind: ChangeKind::Deleted,
            resource_version: version,
            object: object.clone(),
            previous: None,
        });
        object
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

    /// Creates or replaces an object on behalf of the test (no validation, no version checks).
    pub(crate) fn put<K: StoredKind>(&self, mut object: K) -> K {
        let mut state = self.lock();
        let meta = object.metadata();
        let key = (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        );
        let old = K::collection(&state).objects.get(&key).cloned();
        let version = self.next_version(&mut state);
        let stamped = now();
        let generation = match &old {
            Some(old) if object.spec_differs(old) => old.metadata().generation.unwrap_or(0) + 1,
            Some(old) => old.metadata().generation.unwrap_or(1),
            None => 1,
        };
        let meta = object.metadata_mut();
        if meta.uid.as_deref().unwrap_or("").is_empty() {
            meta.uid = Some(
                old.as_ref()
                    .and_then(|o| o.metadata().uid.clone())
                    .unwrap_or_else(new_uid),
            );
        }
        if meta.creation_timestamp.is_none() {
            meta.creation_timestamp = Some(
                old.as_ref()
                    .and_then(|o| o.metadata().creation_timestamp.clone())
                    .unwrap_or(Time(stamped)),
            );
        }
        meta.resource_version = Some(version.to_string());
        meta.generation = K::TRACKS_GENERATION.then_some(generation);
        let kind = if old.is_some() {
            ChangeKind::Modified
        } else {
            ChangeKind::Added
        };
        let collection = K::collection_mut(&mut state);
        collection.objects.insert(key, object.clone());
        collection.record(Change {
            kind,
            resource_version: version,
            object: object.clone(),
            previous: old,
        });
        drop(state);
        self.announce(version);
        object
    }

    /// Deletes an object on behalf of the test; whether it existed.
    pub(crate) fn remove<K: StoredKind>(&self, namespace: &str, name: &str) -> bool {
        self.delete::<K>(namespace, name, &Preconditions::default())
            .is_ok()
    }
}

/// The message of a stale-resourceVersion conflict.
const STALE: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

fn not_found<K: StoredKind>(name: &str) -> ApiError {
    ApiError::not_found(K::URL_PATH_SEGMENT, K::GROUP, name)
}

fn invalid<K: StoredKind>(name: &str, errors: Vec<FieldError>) -> ApiError {
    ApiError::invalid(K::KIND, K::GROUP, name, &errors)
}

/// A body namespace must match the URL's (or be empty).
fn check_namespace(body: Option<&str>, url: &str) -> Result<(), ApiError> {
    match body {
        Some(ns) if !ns.is_empty() && ns != url => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => Ok(()),
    }
}

/// Object names are DNS subdomains.
fn name_errors(name: &str) -> Vec<FieldError> {
    dns_subdomain_problem(name)
        .map(|detail| {
            FieldError::new(
                "metadata.name",
                FieldErrorKind::Invalid {
                    value: name.into(),
                    detail,
                },
            )
        })
        .into_iter()
        .collect()
}
