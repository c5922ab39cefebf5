//! A stand-in for the kubelet's device manager, for tests and the demo.
//!
//! [`SimKubelet`] serves `Registration` on `kubelet.sock` in a folder of its
//! own and behaves the way the real kubelet does: it checks the version,
//! the resource name and the endpoint, dials the plugin back and calls
//! `GetDevicePluginOptions` *inside* `Register`, then consumes
//! `ListAndWatch`. It admits containers the kubelet's way
//! (`GetPreferredAllocation` when offered, `Allocate`, then
//! `PreStartContainer` when required) and can restart itself the way a
//! kubelet does: delete every socket in the folder and serve again.
//!
//! It is strict where the kubelet is lenient, so tests notice mistakes: a
//! preferred allocation of the wrong size, options that disagree with the
//! registration, or a health string other than `Healthy`/`Unhealthy` are
//! recorded as protocol violations. It does not model NUMA alignment.
//! It models the kubelet's side of a plugin going away: devices
//! `Unhealthy` when its stream ends, allocatable 0, the endpoint kept for
//! the 5-minute grace (settable) within which a pod's container starts
//! again ([`SimKubelet::restart_container`]) and after which it cannot,
//! and, on request, the checkpoint that keeps pods across a restart
//! ([`SimKubelet::restart_with_checkpoint`]); and it serves the
//! PodResources API of its pods ([`pod_resources`]).
//!
//! [`SimPluginWatcher`] stands in for the kubelet's other registration
//! path, the plugin watcher ([`plugin_watcher`]); it dials registration
//! sockets the way the kubelet does ([`kubelet_dial`]). [`SimDraKubelet`]
//! stands in for the kubelet's DRA side on the same watcher ([`dra`]):
//! driver registration, `NodePrepareResources`/`NodeUnprepareResources`
//! and the `NodeWatchResources` health stream.

pub mod checkpoint;
pub mod dra;
mod error;
pub mod kubelet_dial;
mod plugin_client;
pub mod plugin_watcher;
pub mod pod_resources;
mod registration;
mod registry_watch;
mod state;

pub use error::SimError;
use plugin_client::dial;
pub use pod_resources::{PodResourcesFault, PodResourcesServer};
use registration::serve;
use registry_watch::remove_sockets;
pub use state::{Admission, ENDPOINT_STOP_GRACE, PluginRecord, SimPod, SimState};

pub use dra::{ClaimRef, DraDriverRecord, DraSimOptions, DraSimState, SimDraKubelet};
pub use plugin_watcher::{SimPluginWatcher, WatchedPlugin, WatcherState};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic::Request;
use wdp_kubelet_api::v1beta1::{
    self, AllocateRequest, ContainerAllocateRequest, ContainerAllocateResponse,
    ContainerPreferredAllocationRequest, Device, PreStartContainerRequest,
    PreferredAllocationRequest, device_plugin_client::DevicePluginClient,
};

/// A running simulated kubelet. Dropping it stops the server.
pub struct SimKubelet {
    dir: PathBuf,
    state: Arc<watch::Sender<SimState>>,
    stop: CancellationToken,
    restarts: u64,
}

impl std::fmt::Debug for SimKubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimKubelet")
            .field("dir", &self.dir)
            .finish()
    }
}

impl SimKubelet {
    /// Serves `Registration` on `<dir>/kubelet.sock`.
    pub async fn start(dir: impl Into<PathBuf>) -> Result<Self, SimError> {
        let dir = dir.into();
        let state = Arc::new(watch::Sender::new(SimState::default()));
        let stop = serve(&dir, state.clone())?;
        checkpoint::keep_written(&dir, &state);
        Ok(Self {
            dir,
            state,
            stop,
            restarts: 0,
        })
    }

    /// The device-plugin folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many times [`restart`](Self::restart) ran.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }

    /// A copy of the current state.
    pub fn state(&self) -> SimState {
        self.state.borrow().clone()
    }

    /// The record of `resource`, if registered.
    pub fn plugin(&self, resource: &str) -> Option<PluginRecord> {
        self.state.borrow().plugins.get(resource).cloned()
    }

    /// Restarts like a kubelet: stop serving, delete every socket in the
    /// folder (the plugin's included), forget registrations, serve again.
    pub async fn restart(&mut self) -> Result<(), SimError> {
        self.stop.cancel();
        remove_sockets(&self.dir);
        self.state.send_modify(|s| {
            s.plugins.clear();
            s.allocated.clear();
            s.pods.clear();
        });
        self.stop = serve(&self.dir, self.state.clone())?;
        self.restarts += 1;
        Ok(())
    }

    /// Stops serving and removes `kubelet.sock`.
    pub fn stop(&self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(self.dir.join(v1beta1::KUBELET_SOCKET));
    }

    /// Waits until `condition` holds for the state, or `timeout` passes.
    pub async fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        mut condition: impl FnMut(&SimState) -> bool,
    ) -> Result<SimState, SimError> {
        let mut rx = self.state.subscribe();
        let wait = rx.wait_for(|s| condition(s));
        match tokio::time::timeout(timeout, wait).await {
            Ok(Ok(state)) => Ok(state.clone()),
            _ => Err(SimError::Timeout(timeout, what.to_owned())),
        }
    }

    /// Waits until `resource` has registered at least `count` times since
    /// the last restart and its `ListAndWatch` delivered a list.
    pub async fn wait_registered(
        &self,
        resource: &str,
        count: u64,
        timeout: Duration,
    ) -> Result<PluginRecord, SimError> {
        let state = self
            .wait_for(&format!("{resource} to register"), timeout, |s| {
                s.plugins
                    .get(resource)
                    .is_some_and(|p| p.registrations >= count && p.lists_received > 0)
            })
            .await?;
        Ok(state.plugins[resource].clone())
    }

    /// Waits until the device list of `resource` satisfies `condition`.
    pub async fn wait_devices(
        &self,
        resource: &str,
        timeout: Duration,
        mut condition: impl FnMut(&[Device]) -> bool,
    ) -> Result<Vec<Device>, SimError> {
        let state = self
            .wait_for(&format!("devices of {resource}"), timeout, |s| {
                s.plugins
                    .get(resource)
                    .is_some_and(|p| p.lists_received > 0 && condition(&p.devices))
            })
            .await?;
        Ok(state.plugins[resource].devices.clone())
    }

    /// A `DevicePlugin` client connected to the socket `resource` registered.
    pub async fn client(
        &self,
        resource: &str,
    ) -> Result<DevicePluginClient<tonic::transport::Channel>, SimError> {
        let record = self
            .plugin(resource)
            .ok_or_else(|| SimError::NotRegistered(resource.to_owned()))?;
        dial(&self.dir.join(&record.registration.endpoint)).await
    }

    /// Admits one container asking for `count` devices of `resource`, from
    /// the healthy devices not yet handed out, as the kubelet would.
    pub async fn admit(&self, resource: &str, count: usize) -> Result<Admission, SimError> {
        let record = self
            .plugin(resource)
            .ok_or_else(|| SimError::NotRegistered(resource.to_owned()))?;
        let allocated = self
            .state
            .borrow()
            .allocated
            .get(resource)
            .cloned()
            .unwrap_or_default();
        let available: Vec<String> = record
            .healthy_ids()
            .into_iter()
            .filter(|id| !allocated.contains(id))
            .collect();
        if available.len() < count {
            return Err(SimError::Admission(format!(
                "{resource}: {count} requested, {} healthy and free",
                available.len()
            )));
        }
        let mut client = self.client(resource).await?;
        let options = record.options();
        let mut timings = Vec::new();

        let mut preferred = None;
        let mut chosen: Vec<String> = available[..count].to_vec();
        if options.get_preferred_allocation_available {
            let started = Instant::now();
            let reply = client
                .get_preferred_allocation(PreferredAllocationRequest {
                    container_requests: vec![ContainerPreferredAllocationRequest {
                        available_device_i_ds: available.clone(),
                        must_include_device_i_ds: vec![],
                        allocation_size: count as i32,
                    }],
                })
                .await
                .map_err(|status| SimError::rpc("GetPreferredAllocation", status))?
                .into_inner();
            timings.push(("GetPreferredAllocation", started.elapsed()));
            let ids = reply
                .container_responses
                .first()
                .map(|r| r.device_i_ds.clone())
                .unwrap_or_default();
            let distinct: BTreeSet<&String> = ids.iter().collect();
            if ids.len() != count
                || distinct.len() != ids.len()
                || !ids.iter().all(|id| available.contains(id))
            {
                self.violation(format!(
                    "{resource}: GetPreferredAllocation answered {ids:?} for size {count} from {available:?}"
                ));
            } else {
                chosen = ids.clone();
            }
            preferred = Some(ids);
        }

        let started = Instant::now();
        let reply = client
            .allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: chosen.clone(),
                }],
            })
            .await
            .map_err(|status| SimError::rpc("Allocate", status))?
            .into_inner();
        timings.push(("Allocate", started.elapsed()));
        let Some(response) = reply.container_responses.into_iter().next() else {
            return Err(SimError::Admission(
                "no containers return in allocation response".to_owned(),
            ));
        };

        let mut pre_started = false;
        if options.pre_start_required {
            let started = Instant::now();
            let mut request = Request::new(PreStartContainerRequest {
                devices_ids: chosen.clone(),
            });
            request.set_timeout(Duration::from_secs(
                v1beta1::PRE_START_CONTAINER_TIMEOUT_SECS,
            ));
            client
                .pre_start_container(request)
                .await
                .map_err(|status| SimError::rpc("PreStartContainer", status))?;
            timings.push(("PreStartContainer", started.elapsed()));
            pre_started = true;
        }
        let mut pod = String::new();
        self.state.send_modify(|s| {
            s.allocated
                .entry(resource.to_owned())
                .or_default()
                .extend(chosen.iter().cloned());
            pod = format!("pod-{}", s.pods_admitted);
            s.pods_admitted += 1;
            s.pods.insert(
                pod.clone(),
                SimPod {
                    container: "main".to_owned(),
                    resource: resource.to_owned(),
                    devices: chosen.clone(),
                    response: response.clone(),
                },
            );
        });
        Ok(Admission {
            preferred,
            devices: chosen,
            response,
            pre_started,
            timings,
            pod,
        })
    }

    /// Forgets that `ids` of `resource` are in use (a pod ended): pods left
    /// holding nothing end.
    pub fn release(&self, resource: &str, ids: &[String]) {
        self.state.send_modify(|s| {
            if let Some(set) = s.allocated.get_mut(resource) {
                for id in ids {
                    set.remove(id);
                }
            }
            for pod in s.pods.values_mut() {
                if pod.resource == resource {
                    pod.devices.retain(|d| !ids.contains(d));
                }
            }
            s.pods.retain(|_, pod| !pod.devices.is_empty());
        });
    }

    /// Runs a pod holding `devices` of `resource` that no admission of
    /// this stand-in made (one from before: the kubelet's checkpoint, or a
    /// plugin since gone); answers its name.
    pub fn add_pod(&self, resource: &str, devices: &[&str]) -> String {
        let mut pod = String::new();
        self.state.send_modify(|s| {
            pod = format!("pod-{}", s.pods_admitted);
            s.pods_admitted += 1;
            s.allocated
                .entry(resource.to_owned())
                .or_default()
                .extend(devices.iter().map(|d| (*d).to_owned()));
            s.pods.insert(
                pod.clone(),
                SimPod {
                    container: "main".to_owned(),
                    resource: resource.to_owned(),
                    devices: devices.iter().map(|d| (*d).to_owned()).collect(),
                    response: ContainerAllocateResponse::default(),
                },
            );
        });
        pod
    }

    /// Ends pod `pod`: its devices are free again (and PodResources no
    /// longer lists them). Whether it ran.
    pub fn end_pod(&self, pod: &str) -> bool {
        let mut ended = false;
        self.state.send_modify(|s| {
            if let Some(gone) = s.pods.remove(pod) {
                if let Some(set) = s.allocated.get_mut(&gone.resource) {
                    for id in &gone.devices {
                        set.remove(id);
                    }
                }
                ended = true;
            }
        });
        ended
    }

    /// Starts pod `pod`'s container again as the kubelet does: with the
    /// devices and answer of its checkpoint, calling `PreStartContainer`
    /// when the plugin requires it; refused when the plugin's endpoint is
    /// gone (stopped longer than the grace ago), as the kubelet refuses it
    /// ("endpoint not found in cache for a registered resource"). Answers
    /// the devices the container gets.
    pub async fn restart_container(&self, pod: &str) -> Result<Vec<String>, SimError> {
        let (held, record, grace) = {
            let state = self.state.borrow();
            let held = state
                .pods
                .get(pod)
                .cloned()
                .ok_or_else(|| SimError::Admission(format!("no pod {pod}")))?;
            let record = state.plugins.get(&held.resource).cloned();
            (held, record, state.endpoint_grace())
        };
        let record = record.filter(|r| r.endpoint_kept(grace)).ok_or_else(|| {
            SimError::Admission(format!(
                "{pod}: endpoint not found in cache for a registered resource: {}",
                held.resource
            ))
        })?;
        if record.options().pre_start_required {
            let mut client = self.client(&held.resource).await?;
            client
                .pre_start_container(PreStartContainerRequest {
                    devices_ids: held.devices.clone(),
                })
                .await
                .map_err(|status| SimError::rpc("PreStartContainer", status))?;
        }
        Ok(held.devices)
    }

    /// Sets how long a stopped plugin's endpoint is kept (the kubelet's
    /// 5-minute `endpointStopGracePeriod`, shortened for tests).
    pub fn set_endpoint_grace(&self, grace: Duration) {
        self.state.send_modify(|s| s.endpoint_grace = Some(grace));
    }

    /// Restarts like a kubelet that reads its checkpoint: as
    /// [`restart`](Self::restart), but the pods and the devices they hold
    /// survive (registrations do not).
    pub async fn restart_with_checkpoint(&mut self) -> Result<(), SimError> {
        let (pods, allocated) = {
            let state = self.state.borrow();
            (state.pods.clone(), state.allocated.clone())
        };
        self.restart().await?;
        self.state.send_modify(|s| {
            s.pods = pods;
            s.allocated = allocated;
        });
        Ok(())
    }

    /// Serves the kubelet's PodResources API on `socket`, from this
    /// kubelet's pods, until the returned server is stopped or dropped.
    pub fn serve_pod_resources(
        &self,
        socket: impl Into<PathBuf>,
    ) -> Result<PodResourcesServer, SimError> {
        PodResourcesServer::start(socket.into(), self.state.clone())
    }

    fn violation(&self, text: String) {
        tracing::warn!(violation = %text, "device plugin broke the protocol");
        self.state.send_modify(|s| s.violations.push(text));
    }
}

impl Drop for SimKubelet {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
