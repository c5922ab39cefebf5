//! A stand-in for the kubelet's plugin watcher and its device-plugin
//! handler: it watches a plugins registry folder, and for every socket
//! that appears (names starting with `.` and non-sockets are ignored, as
//! the kubelet does) it dials the socket the way the kubelet does
//! ([`crate::kubelet_dial`], the socket path as `:authority`), calls
//! `GetInfo`, validates the answer (type `DevicePlugin`, `v1beta1` among
//! the versions, an extended resource name, an absolute endpoint), dials
//! the endpoint, calls `GetDevicePluginOptions`, starts consuming
//! `ListAndWatch`, and reports with `NotifyRegistrationStatus`. A socket
//! removed deregisters its plugin. It can be told to refuse every
//! registration with a reason, and restarts like a kubelet whose restart
//! cleans the registry folder: every socket there is deleted, state is
//! forgotten, and sockets are discovered again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::pluginregistration::{DEVICE_PLUGIN_TYPE, PluginInfo};
use wdp_kubelet_api::v1beta1::{
    self, AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse, Device,
    DevicePluginOptions, Empty, PreStartContainerRequest, device_plugin_client::DevicePluginClient,
};

use crate::error::SimError;
use crate::kubelet_dial::DialError;
use crate::registration::is_extended_resource_name;
use crate::registry_watch::{
    Handled, HandlerFuture, OpenError, RegistryWatch, SocketHandler, notify_status,
    open_registration,
};

/// What the watcher knows about one registered plugin.
#[derive(Clone, Debug)]
pub struct WatchedPlugin {
    /// The registration socket it was found at.
    pub socket: PathBuf,
    /// What `GetInfo` answered.
    pub info: PluginInfo,
    /// What `GetDevicePluginOptions` answered.
    pub options: DevicePluginOptions,
    /// Registrations of this resource since the watcher (re)started.
    pub registrations: u64,
    /// When the last registration completed.
    pub registered_at: Instant,
    /// The last `ListAndWatch` list (all Unhealthy once the stream ended).
    pub devices: Vec<Device>,
    /// Lists received on the current stream.
    pub lists_received: u64,
    /// Whether the `ListAndWatch` stream is open.
    pub streaming: bool,
    /// Whether the plugin answered `NotifyRegistrationStatus`, the last
    /// step of the kubelet's registration.
    pub notified: bool,
    generation: u64,
}

/// The watcher's view, published on a watch channel.
#[derive(Clone, Debug, Default)]
pub struct WatcherState {
    /// Registered plugins by resource name (a plugin whose socket went is
    /// deregistered and leaves this map).
    pub plugins: BTreeMap<String, WatchedPlugin>,
    /// Registrations per resource since the watcher (re)started, counting
    /// those of plugins deregistered since.
    pub registrations: BTreeMap<String, u64>,
    /// Registrations that failed or were refused: (socket, reason).
    pub failures: Vec<(PathBuf, String)>,
    /// Registrations refused on purpose ([`SimPluginWatcher::refuse`]).
    pub refused: Vec<(PathBuf, String)>,
}

/// A running plugin-watcher stand-in. Dropping it stops it.
pub struct SimPluginWatcher {
    dir: PathBuf,
    state: Arc<watch::Sender<WatcherState>>,
    refuse: Arc<Mutex<Option<String>>>,
    watch: RegistryWatch,
    restarts: u64,
}

impl std::fmt::Debug for SimPluginWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimPluginWatcher")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl SimPluginWatcher {
    /// Watches `dir` (created if missing) and registers what appears there.
    pub async fn start(dir: impl Into<PathBuf>) -> Result<Self, SimError> {
        let dir = dir.into();
        let state = Arc::new(watch::Sender::new(WatcherState::default()));
        let refuse = Arc::new(Mutex::new(None));
        let handler = DevicePluginHandler {
            state: state.clone(),
            refuse: refuse.clone(),
            generation: AtomicU64::new(0),
        };
        let watch = RegistryWatch::start(&dir, Arc::new(handler))?;
        Ok(Self {
            dir,
            state,
            refuse,
            watch,
            restarts: 0,
        })
    }

    /// The registry folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A copy of the current state.
    pub fn state(&self) -> WatcherState {
        self.state.borrow().clone()
    }

    /// From now on, answer every registration with
    /// `NotifyRegistrationStatus(false, reason)`; `None` accepts again.
    pub fn refuse(&self, reason: Option<&str>) {
        *self.refuse.lock().unwrap_or_else(PoisonError::into_inner) = reason.map(str::to_owned);
    }

    /// How many times [`restart`](Self::restart) ran.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// Restarts like a kubelet that cleans the registry folder: stop,
    /// delete every socket there, forget every plugin, watch again.
    pub async fn restart(&mut self) -> Result<(), SimError> {
        // Nothing of the old instance may register what the new one finds.
        self.watch.stop_and_clean().await;
        self.state.send_modify(|s| {
            s.plugins.clear();
            s.registrations.clear();
        });
        self.watch.resume()?;
        self.restarts += 1;
        Ok(())
    }

    /// Waits until `condition` holds, or `timeout` passes.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut condition: impl FnMut(&WatcherState) -> bool,
    ) -> Result<WatcherState, SimError> {
        let mut rx = self.state.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(|s| condition(s))).await {
            Ok(Ok(state)) => Ok(state.clone()),
            _ => Err(SimError::Timeout(timeout, what.to_owned())),
        }
    }

    /// Waits until `resource` registered at least `count` times since the
    /// last restart and its `ListAndWatch` delivered a list.
    pub async fn wait_registered(
        &self,
        resource: &str,
        count: u64,
        timeout: Duration,
    ) -> Result<WatchedPlugin, SimError> {
        let state = self
            .wait_for(&format!("{resource} to register"), timeout, |s| {
                s.plugins
                    .get(resource)
                    .is_some_and(|p| p.registrations >= count && p.lists_received > 0 && p.notified)
            })
            .await?;
        Ok(state.plugins[resource].clone())
    }

    /// Admits one container asking for `count` healthy devices of
    /// `resource` (`Allocate`, then `PreStartContainer` when required).
    pub async fn admit(
        &self,
        resource: &str,
        count: usize,
    ) -> Result<(Vec<String>, ContainerAllocateResponse), SimError> {
        let plugin = self
            .state
            .borrow()
            .plugins
            .get(resource)
            .cloned()
            .ok_or_else(|| SimError::NotRegistered(resource.to_owned()))?;
        let ids: Vec<String> = plugin
            .devices
            .iter()
            .filter(|d| d.health == v1beta1::HEALTHY)
            .take(count)
            .map(|d| d.id.clone())
            .collect();
        if ids.len() < count {
            return Err(SimError::Admission(format!(
                "{resource}: {count} requested, {} healthy",
                ids.len()
            )));
        }
        let mut client = crate::plugin_client::dial(Path::new(&plugin.info.endpoint)).await?;
        let reply = client
            .allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: ids.clone(),
                }],
            })
            .await
            .map_err(|status| SimError::rpc("Allocate", status))?
            .into_inner();
        let response = reply
            .container_responses
            .into_iter()
            .next()
            .ok_or_else(|| SimError::Admission("no container response".into()))?;
        if plugin.options.pre_start_required {
            client
                .pre_start_container(PreStartContainerRequest {
                    devices_ids: ids.clone(),
                })
                .await
                .map_err(|status| SimError::rpc("PreStartContainer", status))?;
        }
        Ok((ids, response))
    }
}

/// The device-plugin handler of the plugin watcher.
struct DevicePluginHandler {
    state: Arc<watch::Sender<WatcherState>>,
    refuse: Arc<Mutex<Option<String>>>,
    generation: AtomicU64,
}

impl SocketHandler for DevicePluginHandler {
    fn register(&self, socket: PathBuf, stop: CancellationToken) -> HandlerFuture<'_> {
        Box::pin(async move {
            let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
            let reason = self
                .refuse
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            register(&socket, generation, reason, &self.state, &stop).await
        })
    }

    fn deregister(&self, socket: &Path) {
        self.state
            .send_modify(|s| s.plugins.retain(|_, p| p.socket != socket));
    }
}

/// One registration, the kubelet's `RegisterPlugin` operation.
async fn register(
    socket: &Path,
    generation: u64,
    refuse: Option<String>,
    state: &Arc<watch::Sender<WatcherState>>,
    stop: &CancellationToken,
) -> Handled {
    let fail = |reason: String| {
        tracing::warn!(socket = %socket.display(), %reason, "plugin registration failed");
        state.send_modify(|s| s.failures.push((socket.to_owned(), reason)));
        Handled::Done
    };
    let (mut conn, info) = match open_registration(socket).await {
        Ok(opened) => opened,
        Err(OpenError::NotYet(e)) => {
            tracing::debug!(socket = %socket.display(), error = %e, "cannot dial yet");
            return Handled::NotYet;
        }
        Err(OpenError::GetInfo(e)) => return fail(format!("GetInfo: {e}")),
    };
    let problem = if info.r#type != DEVICE_PLUGIN_TYPE {
        Some(format!(
            "no handler registered for plugin type: {}",
            info.r#type
        ))
    } else if !info
        .supported_versions
        .iter()
        .any(|v| v == v1beta1::VERSION)
    {
        Some(format!(
            "manager version, {}, is not among plugin supported versions {:?}",
            v1beta1::VERSION,
            info.supported_versions
        ))
    } else if !is_extended_resource_name(&info.name) {
        Some(format!(
            "invalid name of device plugin socket: {}",
            info.name
        ))
    } else if !Path::new(&info.endpoint).is_absolute() {
        Some(format!(
            "endpoint {:?} is not an absolute path",
            info.endpoint
        ))
    } else {
        None
    };
    if let Some(problem) = problem {
        let _ = notify_status(&mut conn, false, problem.clone()).await;
        return fail(problem);
    }
    if let Some(reason) = refuse {
        let sent = notify_status(&mut conn, false, reason.clone()).await;
        state.send_modify(|s| s.refused.push((socket.to_owned(), reason)));
        if let Err(e) = sent {
            fail(format!("NotifyRegistrationStatus: {e}"));
        }
        return Handled::Done;
    }
    let mut client = match crate::plugin_client::dial(Path::new(&info.endpoint)).await {
        Ok(client) => client,
        Err(e) => return fail(e.to_string()),
    };
    let options = match client.get_device_plugin_options(Empty {}).await {
        Ok(o) => o.into_inner(),
        Err(status) => return fail(format!("GetDevicePluginOptions: {status}")),
    };
    let resource = info.name.clone();
    state.send_modify(|s| {
        let count = s.registrations.entry(resource.clone()).or_default();
        *count += 1;
        let registrations = *count;
        s.plugins.insert(
            resource.clone(),
            WatchedPlugin {
                socket: socket.to_owned(),
                info: info.clone(),
                options,
                registrations,
                registered_at: Instant::now(),
                devices: Vec::new(),
                lists_received: 0,
                streaming: false,
                notified: false,
                generation,
            },
        );
    });
    tokio::spawn(list_and_watch(
        client,
        resource.clone(),
        generation,
        state.clone(),
        stop.clone(),
    ));
    match notify_status(&mut conn, true, String::new()).await {
        Ok(_) => state.send_modify(|s| {
            if let Some(p) = s
                .plugins
                .get_mut(&resource)
                .filter(|p| p.generation == generation)
            {
                p.notified = true;
            }
        }),
        Err(e) => {
            fail(format!("NotifyRegistrationStatus: {e}"));
        }
    }
    Handled::Done
}

async fn list_and_watch(
    mut client: DevicePluginClient<tonic::transport::Channel>,
    resource: String,
    generation: u64,
    state: Arc<watch::Sender<WatcherState>>,
    stop: CancellationToken,
) {
    let Ok(response) = client.list_and_watch(Empty {}).await else {
        return;
    };
    let mut stream = response.into_inner();
    let update = |f: &mut dyn FnMut(&mut WatchedPlugin)| {
        state.send_modify(|s| {
            if let Some(p) = s
                .plugins
                .get_mut(&resource)
                .filter(|p| p.generation == generation)
            {
                f(p);
            }
        })
    };
    update(&mut |p| p.streaming = true);
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(Ok(list)) = next else { break };
        update(&mut |p| {
            p.devices = list.devices.clone();
            p.lists_received += 1;
        });
    }
    update(&mut |p| {
        p.streaming = false;
        for d in &mut p.devices {
            d.health = v1beta1::UNHEALTHY.to_owned();
        }
    });
}

/// Whether a call failed because the server reset the stream, as h2 does
/// for an `:authority` it cannot parse.
pub fn is_reset(error: &DialError) -> bool {
    matches!(error, DialError::Reset(_))
}
