//! Waiting for the stored ResourceSlices (or a Node's labels) to reach a state: the check is rerun after every write,
//! until it holds or the time is up ([`Timeout`]).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;

use crate::store::{Filter, Store};

/// `wait_for_slices` gave up: the predicate never held.
#[derive(Debug, thiserror::Error)]
#[error("the ResourceSlices did not reach the awaited state within {waited:?}; last seen: {} slices", last.len())]
pub struct Timeout {
    /// How long it waited.
    pub waited: Duration,
    /// The slices at the moment it gave up.
    pub last: Vec<ResourceSlice>,
}

/// Every ResourceSlice, ordered by name.
fn all_slices(store: &Store) -> Vec<ResourceSlice> {
    store.list::<ResourceSlice>(&Filter::default()).0
}

/// Waits until `pred` holds for the slices in `store` (checked now and after every write).
pub(crate) async fn slices_until<F: Fn(&[ResourceSlice]) -> bool>(
    store: &Store,
    pred: F,
    timeout: Duration,
) -> Result<Vec<ResourceSlice>, Timeout> {
    let mut writes = store.subscribe_writes();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Mark seen before reading, so a write after the read wakes the next wait.
        writes.borrow_and_update();
        let slices = all_slices(store);
        if pred(&slices) {
            return Ok(slices);
        }
        match tokio::time::timeout_at(deadline, writes.changed()).await {
            Ok(Ok(())) => {}
            // The caller's borrow keeps the store alive, so the sender cannot be gone; treat it
            // like a timeout all the same.
            Ok(Err(_)) | Err(_) => {
                return Err(Timeout {
                    waited: timeout,
                    last: all_slices(store),
                });
            }
        }
    }
}

/// Waits until `pred` holds for the labels of Node `name` (checked now and
/// after every write); the labels as last seen when it gives up.
pub(crate) async fn node_labels_until<F: Fn(&BTreeMap<String, String>) -> bool>(
    store: &Store,
    name: &str,
    pred: F,
    timeout: Duration,
) -> Result<BTreeMap<String, String>, BTreeMap<String, String>> {
    let labels = || {
        store
            .get::<Node>("", name)
            .ok()
            .and_then(|node| node.metadata.labels)
            .unwrap_or_default()
    };
    let mut writes = store.subscribe_writes();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        writes.borrow_and_update();
        let now = labels();
        if pred(&now) {
            return Ok(now);
        }
        match tokio::time::timeout_at(deadline, writes.changed()).await {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => return Err(labels()),
        }
    }
}
