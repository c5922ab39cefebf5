//! The host's one state ([`HostState`]) and its transitions.
//!
//! Everything of a running [`Host`](crate::Host) that changes lives in one
//! struct behind one `tokio::sync::Mutex` (`Host::state`): the
//! configuration served, the served resources, the DRA drivers' API port,
//! the draining drivers, the handovers between the kubelet APIs, the
//! guests' builds kept for a revert, the folder watches and whether the
//! node's label is followed. There is no second lock, so there is no lock
//! order to keep.
//!
//! The rule: the lock is held for one transition and let go. The simple
//! transitions are the methods below, which never await. The host's
//! transitions that must await while holding it (so that no reader sees a
//! resource half put in service, half withdrawn or half handed over) take
//! `&mut HostState` from their caller, and are these:
//!
//! - a reload's apply (`Host::try_reload` → `Host::apply`): withdrawing
//!   removed resources (their servers stop, a DRA driver starts draining, a
//!   handover under way ends: its retiring server stops), launching new
//!   ones (`Host::launch`: a draining driver of the same name stops first,
//!   the API client may be made), switching a resource between the APIs
//!   (`Host::switch_api`: the handover reads the kubelet's PodResources or
//!   the draining claims' devices before serving);
//! - the start's launch of every resource (`Host::launch_all`), with the
//!   handovers it resumes (`Host::resume_handover`: a retiring resource
//!   loaded, PodResources read, draining drivers started), and such a
//!   resume once an unreadable DRA checkpoint can be read;
//! - making the DRA drivers' API client (`Host::dra_api`, inside the
//!   above: it reads the kubeconfig, no request is made).
//!
//! None of the tasks these await takes the lock. Nothing else awaits with
//! it held: reading and planning a reload (guests loaded and compiled,
//! seconds) happen before it is taken, serialised by `Host::reloads`, a
//! gate that guards no data; the last good configuration is written, the
//! shutdown's servers and draining drivers stopped and the node label's
//! API client made after it is let go.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use wdp_config::ConfigSet;
use wdp_dra_driver::{ApiPort, Draining};
use wdp_policy::PolicyEngine;

use crate::api_switch::{Direction, Handover};
use crate::running::{Running, builds_in_use};

/// What changes in a running host (see the module docs for the rule).
pub(crate) struct HostState {
    /// The configuration being served.
    pub(crate) config: ConfigSet,
    /// The served resources, by name.
    pub(crate) running: BTreeMap<String, Running>,
    /// The API server for DRA drivers; `None` until a DRA resource is
    /// first served (the API client is made only then).
    pub(crate) dra_api: Option<Arc<dyn ApiPort>>,
    /// Whether the node's label that picks the configuration set is
    /// followed already.
    pub(crate) following_label: bool,
    /// Content hashes of the guests the configuration before the current
    /// one used: a reload keeps them compiled, so reverting is a cache hit.
    pub(crate) previous_builds: BTreeSet<String>,
    /// The folder watches (config directory, device-plugin folder).
    pub(crate) watchers: Vec<wdp_fs_watch::FolderWatch>,
    /// DRA drivers whose resource left the configuration, still serving
    /// unprepare for the claims they prepared.
    pub(crate) draining: Vec<Draining>,
    /// Resources moving between the kubelet APIs, by name
    /// ([`crate::api_switch`]).
    pub(crate) handovers: BTreeMap<String, Handover>,
}

impl HostState {
    /// The state of a host starting to serve `config`, watching with
    /// `watcher`, nothing served yet.
    pub(crate) fn new(
        config: ConfigSet,
        dra_api: Option<Arc<dyn ApiPort>>,
        watcher: wdp_fs_watch::FolderWatch,
    ) -> Self {
        Self {
            config,
            running: BTreeMap::new(),
            dra_api,
            following_label: false,
            previous_builds: BTreeSet::new(),
            watchers: vec![watcher],
            draining: Vec::new(),
            handovers: BTreeMap::new(),
        }
    }

    /// Takes the draining drivers named `driver` (their resource is served
    /// again: the caller stops them), and forgets those finished.
    pub(crate) fn take_draining(&mut self, driver: &str) -> Vec<Draining> {
        let (same, others): (Vec<Draining>, Vec<Draining>) = std::mem::take(&mut self.draining)
            .into_iter()
            .partition(|d| d.driver() == driver);
        self.draining = others.into_iter().filter(|d| !d.is_finished()).collect();
        same
    }

    /// Takes the handover of resource `name` under way, if any (the caller
    /// finishes it).
    pub(crate) fn take_handover(&mut self, name: &str) -> Option<Handover> {
        self.handovers.remove(name)
    }

    /// Forgets the finished handovers; answers the others, by name, and
    /// which way (`true`: to DRA).
    pub(crate) fn live_handovers(&mut self) -> Vec<(String, bool)> {
        self.handovers.retain(|_, h| !h.is_finished());
        self.handovers
            .iter()
            .map(|(name, h)| (name.clone(), h.direction == Direction::ToDra))
            .collect()
    }

    /// Marks the label that picks the configuration set as followed;
    /// `false` when it was already.
    pub(crate) fn start_following_label(&mut self) -> bool {
        !std::mem::replace(&mut self.following_label, true)
    }

    /// After a reload's apply: the builds the served resources used before
    /// it (`builds_before`) become the previous ones when they changed, and
    /// `engine` keeps compiled only those and the builds in use now.
    pub(crate) fn keep_builds(&mut self, builds_before: BTreeSet<String>, engine: &PolicyEngine) {
        let used = builds_in_use(self.running.values());
        if used != builds_before {
            self.previous_builds = builds_before;
        }
        let previous = &self.previous_builds;
        engine.retain_compiled(|hash| used.contains(hash) || previous.contains(hash));
    }

    /// Everything a shutdown stops, taken: the folder watches, the
    /// handovers and the served resources.
    pub(crate) fn take_for_shutdown(&mut self) -> Stopping {
        Stopping {
            watchers: std::mem::take(&mut self.watchers),
            handovers: std::mem::take(&mut self.handovers),
            running: std::mem::take(&mut self.running),
        }
    }
}

/// What [`HostState::take_for_shutdown`] took.
pub(crate) struct Stopping {
    /// The folder watches.
    pub(crate) watchers: Vec<wdp_fs_watch::FolderWatch>,
    /// The handovers under way.
    pub(crate) handovers: BTreeMap<String, Handover>,
    /// The served resources.
    pub(crate) running: BTreeMap<String, Running>,
}
