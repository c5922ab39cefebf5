//! The host's side of moving a resource between the kubelet APIs
//! ([`crate::api_switch`] holds the handover itself): a reload that
//! changes a resource's `api` switches it in place of a remove and an add,
//! and a resource removed or switched again ends the handover under way
//! (`crate::resume` is what a starting host resumes).

use std::sync::Arc;

use wdp_config::ServingApi;
use wdp_kubelet_socket::PodResourcesReader;
use wdp_resource::Resource;

use crate::api_switch::{self, SwitchPaths};
use crate::error::HostError;
use crate::running::{Running, Serving};
use crate::state::HostState;
use crate::supervisor::Host;
use crate::switch_record::SwitchRecord;

impl Host {
    /// Where handovers read and record.
    pub(crate) fn switch_paths(&self) -> SwitchPaths {
        SwitchPaths {
            pod_resources: PodResourcesReader::new(&self.options.pod_resources_socket),
            state_dir: self.options.state_dir.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// Ends the handover of resource `name` under way, if any; the caller
    /// holds the state.
    pub(crate) async fn end_handover(&self, state: &mut HostState, name: &str) {
        if let Some(handover) = state.take_handover(name) {
            handover.finish().await;
        }
    }

    /// Which resources are being handed over between the kubelet APIs, and
    /// which way (`true`: to DRA); finished handovers are left out.
    pub async fn handovers(&self) -> Vec<(String, bool)> {
        self.state.lock().await.live_handovers()
    }

    /// Resolves once every handover under way now has ended (finished on
    /// its own or been ended): what it withheld is offered and its switch
    /// record is gone.
    pub async fn handovers_ended(&self) {
        let ended: Vec<_> = self
            .state
            .lock()
            .await
            .handovers
            .values()
            .map(|h| h.ended())
            .collect();
        futures::future::join_all(ended).await;
    }

    /// Serves `new` (the resource `name` under its new `api`) in place of
    /// `old` (the same resource under the other API), handing the devices
    /// over (see [`crate::api_switch`]). The caller holds the state.
    pub(crate) async fn switch_api(
        &self,
        state: &mut HostState,
        name: &str,
        old: Running,
        new: Arc<Resource>,
    ) -> Result<Running, HostError> {
        // A handover still under way ends: this one starts from where it
        // stood (what it withheld is withheld again below).
        self.end_handover(state, name).await;
        let paths = self.switch_paths();
        let Running {
            resource: served,
            serving,
            refresher,
        } = old;
        match serving {
            Serving::DevicePlugin(server) => {
                // The API client first: once the server retires, the
                // resource has to be served through DRA.
                self.dra_api(state, &new).await?;
                refresher.abort();
                let record = SwitchRecord {
                    resource: new.name().to_owned(),
                    driver: new.spec().config.driver.clone().unwrap_or_default(),
                    socket: served.spec().config.socket.clone(),
                };
                tracing::info!(resource = %new.name(), driver = %record.driver, "switching from the device-plugin API to DRA: the device plugin offers no device any more and stays registered for the containers holding devices");
                let handover =
                    api_switch::to_dra(&paths, &record, server, served, new.clone()).await;
                let launched = self.launch(state, new).await?;
                state.handovers.insert(name.to_owned(), handover);
                Ok(launched)
            }
            Serving::Dra(driver) => {
                let record = SwitchRecord {
                    resource: new.name().to_owned(),
                    driver: driver.driver().to_owned(),
                    socket: new.spec().config.socket.clone(),
                };
                tracing::info!(resource = %new.name(), driver = %record.driver, "switching from DRA to the device-plugin API: the driver withdraws its slices and keeps unpreparing its claims");
                self.metrics.dra.forget_driver(name, driver.driver());
                refresher.abort();
                if let Some(draining) = driver.withdraw().await {
                    let claims = draining.claims();
                    state.draining.push(draining);
                    let handover =
                        api_switch::to_device_plugin(&paths, &record, vec![claims], new.clone())
                            .await;
                    state.handovers.insert(name.to_owned(), handover);
                }
                self.launch(state, new).await
            }
        }
    }

    /// `resource` (served through DRA) as the device-plugin server it
    /// moved from served it: the same spec on the recorded socket, loaded
    /// once (it offers nothing, so it is not refreshed).
    pub(crate) async fn retiring_resource(
        &self,
        resource: &Arc<Resource>,
        record: &SwitchRecord,
    ) -> Result<Arc<Resource>, HostError> {
        let mut spec = (*resource.spec()).clone();
        spec.config.api = ServingApi::DevicePlugin;
        spec.config.driver = None;
        spec.config.socket = record.socket.clone();
        let root = self.root.clone();
        let metrics = self.metrics.resource.clone();
        let (served, _) =
            tokio::task::spawn_blocking(move || Resource::new(spec, root, metrics, None))
                .await
                .map_err(HostError::Task)??;
        Ok(served)
    }
}
