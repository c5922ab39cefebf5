//! Following every ResourceClaim of the cluster, for a driver that acts
//! between a claim's allocation and its pod's binding (binding conditions,
//! KEP-5007): the claim is allocated by the scheduler, which then waits in
//! its PreBind step for the driver to report the conditions the devices
//! name. Nothing tells a node's driver that a claim was allocated on its
//! devices but a watch, so [`watch_claims`] turns kube's watcher into
//! [`ClaimEvent`]s: a claim added or changed, a claim deleted, and after
//! every (re)list the UIDs that exist, so that a claim deleted while the
//! watch was down is noticed too. Errors are retried with kube's default
//! backoff and logged once per outage.
//!
//! Claims cannot be selected by node or driver on the server, so the
//! caller filters; it needs `list` and `watch` on `resourceclaims`, which
//! only the passthrough overlay grants.

use std::collections::BTreeSet;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};

/// What the claim watch saw.
#[derive(Debug, Clone)]
pub enum ClaimEvent {
    /// A claim was added or changed (or listed).
    Changed(Box<ResourceClaim>),
    /// A claim was deleted.
    Deleted(Box<ResourceClaim>),
    /// A list finished: these UIDs are every claim that exists now.
    Listed(BTreeSet<String>),
}

/// Follows every ResourceClaim of the cluster (see the module docs). The
/// stream ends only when dropped.
pub fn watch_claims(client: Client) -> BoxStream<'static, ClaimEvent> {
    let api: Api<ResourceClaim> = Api::all(client);
    let mut listing: Option<BTreeSet<String>> = None;
    let mut failing = false;
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(move |event| {
            let mapped = match event {
                Ok(event) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("the ResourceClaim watch is back");
                    }
                    map_event(event, &mut listing)
                }
                Err(error) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%error, "the ResourceClaim watch failed; retrying with backoff (claims allocated meanwhile are bound once it is back)");
                    }
                    None
                }
            };
            std::future::ready(mapped)
        })
        .boxed()
}

/// One watcher event as a [`ClaimEvent`]; a list's items are collected in
/// `listing` until it is done.
fn map_event(
    event: watcher::Event<ResourceClaim>,
    listing: &mut Option<BTreeSet<String>>,
) -> Option<ClaimEvent> {
    match event {
        watcher::Event::Init => {
            *listing = Some(BTreeSet::new());
            None
        }
        watcher::Event::InitApply(claim) => {
            if let (Some(seen), Some(uid)) = (listing.as_mut(), claim.metadata.uid.as_ref()) {
                seen.insert(uid.clone());
            }
            Some(ClaimEvent::Changed(Box::new(claim)))
        }
        watcher::Event::InitDone => Some(ClaimEvent::Listed(listing.take().unwrap_or_default())),
        watcher::Event::Apply(claim) => Some(ClaimEvent::Changed(Box::new(claim))),
        watcher::Event::Delete(claim) => Some(ClaimEvent::Deleted(Box::new(claim))),
    }
}
