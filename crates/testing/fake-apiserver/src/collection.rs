//! The data the store keeps under its lock: per kind a [`Collection`] of objects with a bounded
//! history of their changes (which watches resume from) and a broadcast of new changes, and the
//! [`State`] that holds the three collections and the one global resourceVersion counter.
//!
//! This module only holds and records; checking writes and answering reads is the store's job.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use tokio::sync::broadcast;

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
    /// The current objects, ordered by namespace and name.
    pub(crate) objects: BTreeMap<ObjectKey, K>,
    /// The latest changes, oldest first, at most [`HISTORY_LEN`].
    pub(crate) history: VecDeque<Arc<Change<K>>>,
    /// Watches must start at or after this version; older changes are gone.
    pub(crate) compacted_through: u64,
    /// Every recorded change, for the live watches.
    pub(crate) events: broadcast::Sender<Arc<Change<K>>>,
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

impl<K> Collection<K> {
    /// Drops the history up to `version`: watches from before it get 410 Expired.
    pub(crate) fn forget_history(&mut self, version: u64) {
        self.history.clear();
        self.compacted_through = version;
    }

    /// Appends `change` to the history (dropping the oldest when full) and sends it to the
    /// live watches.
    pub(crate) fn record(&mut self, change: Change<K>) {
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
    /// The resourceVersion of the latest write (global across kinds).
    pub(crate) resource_version: u64,
    pub(crate) slices: Collection<ResourceSlice>,
    pub(crate) claims: Collection<ResourceClaim>,
    pub(crate) nodes: Collection<Node>,
}
