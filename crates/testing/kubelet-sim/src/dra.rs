//! A stand-in for the kubelet's DRA side: its plugin-watcher handler for
//! `DRAPlugin` registrations, its calls to `NodePrepareResources` /
//! `NodeUnprepareResources`, and its consumer of the `NodeWatchResources`
//! health stream.
//!
//! [`SimDraKubelet`] watches a plugins registry folder (the same watcher as
//! [`crate::SimPluginWatcher`], in module `registry_watch`), dials each
//! registration socket the way the kubelet does (the socket path as
//! `:authority`), and accepts a plugin whose `GetInfo` says type
//! `DRAPlugin`, names a driver and gives an absolute endpoint. Like the
//! kubelet it picks the DRA service as the first entry of the plugin's
//! `supported_versions` that it supports itself (refusing a plugin that
//! offers none), and the health service as the newest one it knows that
//! the plugin offers (module `registration`). The endpoint is dialled the way
//! grpc-go dials a `unix:` target (`:authority` `localhost`, connected on
//! demand). Every `NodeWatchResources` update is recorded per device, the
//! stream is opened again after it ends and abandoned on `Unimplemented`
//! (module `health`). [`SimDraKubelet::prepare`] and
//! [`SimDraKubelet::unprepare`] call the driver with the chosen version
//! and the kubelet's 45 s deadline and check the answer the kubelet's way
//! (module `claims`).
//!
//! A restart behaves like the kubelet's: connections and streams go, state
//! is forgotten, every socket in the registry folder is deleted, the
//! `wipe` callback runs (the kubelet deletes every ResourceSlice of its
//! node when it starts; it runs at start too), and the folder is watched
//! again.
//!
//! Several instances of one driver (a rolling update) register side by side
//! as the kubelet's DRA plugin manager does since 1.33 (modelled on 1.34):
//! each registration socket names its own endpoint, a second registration
//! of an endpoint already registered is refused, calls go to the newest
//! registration, and when a socket goes only that instance is deregistered
//! (the newest remaining one is called again). Kubelets before 1.33 kept
//! one plugin per driver name, refused a second registration of the same
//! version and dropped the driver when either socket went. Simplifications:
//! the kubelet prefers the newest *connected* instance where this takes the
//! newest registered; health updates of an instance not called any more
//! are not recorded; no delayed wipe of a gone driver's slices.

mod claims;
mod health;
mod registration;

pub use claims::{ClaimRef, PrepareOutcome, PreparedDevice, UnprepareOutcome};

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::dra::{self, v1, v1beta1};
use wdp_kubelet_api::dra_health;
use wdp_kubelet_api::pluginregistration::PluginInfo;

use crate::error::SimError;
use crate::registry_watch::RegistryWatch;

/// Called when the simulated kubelet starts or restarts, where the real
/// one deletes every ResourceSlice of its node.
pub type WipeCallback = Arc<dyn Fn() + Send + Sync>;

/// How the simulated kubelet behaves.
#[derive(Clone)]
pub struct DraSimOptions {
    /// The DRA services the kubelet supports, newest first (the kubelet's
    /// `servicesSupportedByKubelet`).
    pub supported_services: Vec<String>,
    /// The health services the kubelet supports, newest first.
    pub health_services: Vec<String>,
    /// Called at start and at every restart.
    pub wipe: Option<WipeCallback>,
    /// The deadline of each `NodePrepareResources` /
    /// `NodeUnprepareResources` call (the kubelet's is 45 s).
    pub call_timeout: Duration,
    /// How long after the health stream ended (or could not be opened) it
    /// is opened again (the kubelet retries every 5 s).
    pub health_retry: Duration,
}

impl Default for DraSimOptions {
    fn default() -> Self {
        Self {
            supported_services: vec![v1::SERVICE.to_owned(), v1beta1::SERVICE.to_owned()],
            health_services: vec![
                dra_health::v1::SERVICE.to_owned(),
                dra_health::v1alpha1::SERVICE.to_owned(),
            ],
            wipe: None,
            call_timeout: Duration::from_secs(dra::KUBELET_CALL_TIMEOUT_SECS),
            health_retry: Duration::from_secs(5),
        }
    }
}

impl fmt::Debug for DraSimOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DraSimOptions")
            .field("supported_services", &self.supported_services)
            .field("health_services", &self.health_services)
            .field("wipe", &self.wipe.is_some())
            .field("call_timeout", &self.call_timeout)
            .field("health_retry", &self.health_retry)
            .finish()
    }
}

/// A device's health as the driver last reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceHealth {
    /// `UNKNOWN` (or a value the kubelet does not know).
    Unknown,
    /// `HEALTHY`.
    Healthy,
    /// `UNHEALTHY`.
    Unhealthy,
}

/// One device's entry of the health stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceHealthRecord {
    /// The reported health.
    pub health: DeviceHealth,
    /// The driver's message, cut to 1,024 characters as the kubelet does.
    pub message: String,
    /// When the driver determined it (Unix seconds).
    pub last_updated_time: i64,
    /// `health_check_timeout_seconds` (0: the kubelet's default).
    pub timeout_seconds: i64,
}

/// Where the health stream of a driver stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthStream {
    /// The plugin offers no health service the kubelet knows.
    NotOffered,
    /// Being opened (or waiting to be opened again).
    Opening,
    /// Open and consumed.
    Open,
    /// Ended or could not be opened; opened again after
    /// [`DraSimOptions::health_retry`].
    Ended(String),
    /// The driver answered `Unimplemented`: not opened again.
    Unimplemented,
}

/// What the simulated kubelet knows about one registered DRA driver.
#[derive(Clone, Debug)]
pub struct DraDriverRecord {
    /// The registration socket it was found at.
    pub socket: PathBuf,
    /// What `GetInfo` answered.
    pub info: PluginInfo,
    /// The DRA service chosen, e.g. `v1.DRAPlugin`.
    pub chosen_service: String,
    /// The health service chosen, if the plugin offers one the kubelet knows.
    pub health_service: Option<String>,
    /// Registrations of this driver since the kubelet (re)started.
    pub registrations: u64,
    /// When the last registration completed.
    pub registered_at: Instant,
    /// Health per `(pool, device)`, as last reported.
    pub health: BTreeMap<(String, String), DeviceHealthRecord>,
    /// Health updates received since the registration.
    pub health_updates: u64,
    /// Where the health stream stands.
    pub health_stream: HealthStream,
    /// How many times the health stream was opened.
    pub health_streams_opened: u64,
    /// Identifies this registration, so a stream of an earlier one that
    /// ends late cannot touch this record.
    registration: u64,
    /// The channel to the endpoint, shared by every call.
    channel: tonic::transport::Channel,
    /// Cancelled when this registration goes (deregistered, replaced or a
    /// kubelet restart); ends its health stream.
    stop: CancellationToken,
}

/// The simulated kubelet's view, published on a watch channel.
#[derive(Clone, Debug, Default)]
pub struct DraSimState {
    /// Registered drivers by name, each the newest registration of the
    /// driver, the one the kubelet calls (a driver whose sockets all went
    /// leaves it).
    pub drivers: BTreeMap<String, DraDriverRecord>,
    /// Older registrations of a driver still registered beside the newest
    /// (a rolling update), oldest first.
    pub standby: Vec<DraDriverRecord>,
    /// Registrations per driver since the kubelet (re)started, counting
    /// those of drivers deregistered since.
    pub registrations: BTreeMap<String, u64>,
    /// Registrations that failed or were refused for a protocol reason:
    /// (socket, reason), also sent with `NotifyRegistrationStatus`.
    pub failures: Vec<(PathBuf, String)>,
    /// Registrations refused on purpose ([`SimDraKubelet::refuse`]).
    pub refused: Vec<(PathBuf, String)>,
    /// Protocol mistakes of drivers, in order (e.g. an overlong health
    /// message or an unknown health value).
    pub violations: Vec<String>,
    /// How many times `wipe` ran (start and every restart).
    pub wipes: u64,
}

/// Shared between the handle, the registration handler and the streams.
pub(crate) struct Shared {
    pub(crate) options: DraSimOptions,
    pub(crate) state: watch::Sender<DraSimState>,
    pub(crate) refuse: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn refusal(&self) -> Option<String> {
        self.refuse
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn wipe(&self) {
        if let Some(wipe) = &self.options.wipe {
            wipe();
        }
        self.state.send_modify(|s| s.wipes += 1);
    }
}

/// A running DRA kubelet stand-in. Dropping it stops it.
pub struct SimDraKubelet {
    dir: PathBuf,
    shared: Arc<Shared>,
    watch: RegistryWatch,
    restarts: u64,
}

impl fmt::Debug for SimDraKubelet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimDraKubelet")
            .field("dir", &self.dir)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl SimDraKubelet {
    /// Calls `wipe`, then watches `registry_dir` (created if missing) and
    /// registers the DRA drivers that appear there.
    pub async fn start(
        registry_dir: impl Into<PathBuf>,
        options: DraSimOptions,
    ) -> Result<Self, SimError> {
        let dir = registry_dir.into();
        let shared = Arc::new(Shared {
            options,
            state: watch::Sender::new(DraSimState::default()),
            refuse: Mutex::new(None),
        });
        shared.wipe();
        let handler = registration::DraHandler::new(shared.clone());
        let watch = RegistryWatch::start(&dir, Arc::new(handler))?;
        Ok(Self {
            dir,
            shared,
            watch,
            restarts: 0,
        })
    }

    /// The registry folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The options it runs with.
    pub fn options(&self) -> &DraSimOptions {
        &self.shared.options
    }

    /// How many times [`restart`](Self::restart) ran.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// A copy of the current state.
    pub fn state(&self) -> DraSimState {
        self.shared.state.borrow().clone()
    }

    /// The record of `driver`, if registered.
    pub fn driver(&self, driver: &str) -> Option<DraDriverRecord> {
        self.shared.state.borrow().drivers.get(driver).cloned()
    }

    /// From now on, answer every registration with
    /// `NotifyRegistrationStatus(false, reason)`; `None` accepts again.
    pub fn refuse(&self, reason: Option<&str>) {
        *self
            .shared
            .refuse
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = reason.map(str::to_owned);
    }

    /// Restarts like a kubelet: stop (connections and health streams end),
    /// delete every socket in the registry folder, forget every driver,
    /// call `wipe`, watch the folder again.
    pub async fn restart(&mut self) -> Result<(), SimError> {
        // Nothing of the old instance may register what the new one finds.
        self.watch.stop_and_clean().await;
        self.shared.state.send_modify(|s| {
            for record in s.drivers.values().chain(&s.standby) {
                record.stop.cancel();
            }
            s.drivers.clear();
            s.standby.clear();
            s.registrations.clear();
        });
        self.shared.wipe();
        self.watch.resume()?;
        self.restarts += 1;
        Ok(())
    }

    /// Waits until `condition` holds for the state, or `timeout` passes.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut condition: impl FnMut(&DraSimState) -> bool,
    ) -> Result<DraSimState, SimError> {
        let mut rx = self.shared.state.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(|s| condition(s))).await {
            Ok(Ok(state)) => Ok(state.clone()),
            _ => Err(SimError::Timeout(timeout, what.to_owned())),
        }
    }

    /// Waits until `driver` is registered.
    pub async fn wait_registered(
        &self,
        driver: &str,
        timeout: Duration,
    ) -> Result<DraDriverRecord, SimError> {
        let state = self
            .wait_for(&format!("DRA driver {driver} to register"), timeout, |s| {
                s.drivers.contains_key(driver)
            })
            .await?;
        Ok(state.drivers[driver].clone())
    }

    /// Waits until `driver` is registered and its record (health included)
    /// satisfies `condition`.
    pub async fn wait_health(
        &self,
        driver: &str,
        timeout: Duration,
        mut condition: impl FnMut(&DraDriverRecord) -> bool,
    ) -> Result<DraDriverRecord, SimError> {
        let state = self
            .wait_for(&format!("health of DRA driver {driver}"), timeout, |s| {
                s.drivers.get(driver).is_some_and(&mut condition)
            })
            .await?;
        Ok(state.drivers[driver].clone())
    }

    /// Calls `NodePrepareResources` for `claims` on `driver`, as the kubelet
    /// does before a pod's containers start.
    pub async fn prepare(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<PrepareOutcome, SimError> {
        let record = self.registered(driver)?;
        claims::prepare(
            record.channel,
            &record.chosen_service,
            claims,
            self.shared.options.call_timeout,
        )
        .await
    }

    /// Calls `NodeUnprepareResources` for `claims` on `driver`, as the
    /// kubelet does once a pod no longer needs them.
    pub async fn unprepare(
        &self,
        driver: &str,
        claims: &[ClaimRef],
    ) -> Result<UnprepareOutcome, SimError> {
        let record = self.registered(driver)?;
        claims::unprepare(
            record.channel,
            &record.chosen_service,
            claims,
            self.shared.options.call_timeout,
        )
        .await
    }

    fn registered(&self, driver: &str) -> Result<DraDriverRecord, SimError> {
        self.driver(driver)
            .ok_or_else(|| SimError::DriverNotRegistered(driver.to_owned()))
    }
}

impl Drop for SimDraKubelet {
    fn drop(&mut self) {
        let state = self.shared.state.borrow();
        for record in state.drivers.values().chain(&state.standby) {
            record.stop.cancel();
        }
    }
}
