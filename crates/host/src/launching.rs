//! Putting a resource in service the way its config says: a device-plugin
//! server, or a DRA driver (the API server client made on the first one,
//! a driver still draining from before taken over).

use std::sync::Arc;

use wdp_device_plugin::ServerHandle;
use wdp_dra_driver::{ApiPort, DraDriver, DriverPaths};
use wdp_kubelet_socket::RegistrationPath;
use wdp_resource::Resource;

use crate::error::HostError;
use crate::running::{Running, Serving};
use crate::state::HostState;
use crate::supervisor::Host;

impl Host {
    /// Serves `resource` on its device-plugin socket and registers it, the
    /// way this host registers.
    pub(crate) fn device_plugin_server(&self, resource: Arc<Resource>) -> ServerHandle {
        ServerHandle::start(
            resource,
            self.metrics.device_plugin.clone(),
            self.options.device_plugin_dir.clone(),
            (self.registration_path() == RegistrationPath::PluginWatcher)
                .then(|| self.options.plugins_registry_dir.clone()),
            &self.events,
            &self.shutdown,
        )
    }

    /// Serves `resource` the way its config says: a device-plugin socket,
    /// or a DRA driver (the API client is made on the first one, a driver
    /// of the same name still draining in `state` stops first). The caller
    /// holds the state (see `crate::state`).
    pub(crate) async fn launch(
        &self,
        state: &mut HostState,
        resource: Arc<Resource>,
    ) -> Result<Running, HostError> {
        let driver = resource.spec().config.driver.clone();
        let serving = match driver {
            None => Serving::DevicePlugin(self.device_plugin_server(resource.clone())),
            Some(driver) => {
                // Configured again while draining: the new driver serves
                // the claims left, from the same checkpoint.
                for old in state.take_draining(&driver) {
                    old.stop().await;
                }
                let api = self.dra_api(state, &resource).await?;
                Serving::Dra(DraDriver::start(
                    resource.clone(),
                    self.metrics.dra.clone(),
                    &driver,
                    &self.driver_paths(),
                    &api,
                    &self.shutdown,
                ))
            }
        };
        Ok(self.running(resource, serving))
    }

    /// `resource`, served by `serving`, with its refresh loop started:
    /// the first scan is done.
    pub(crate) fn running(&self, resource: Arc<Resource>, serving: Serving) -> Running {
        let refresher = tokio::spawn(resource.clone().refresh_loop(self.shutdown.clone()));
        Running {
            resource,
            serving,
            refresher,
        }
    }

    /// The API server client of DRA drivers, kept in `state`, made on the
    /// first call (for `resource`, whose file an error names). The caller
    /// holds the state.
    pub(crate) async fn dra_api(
        &self,
        state: &mut HostState,
        resource: &Resource,
    ) -> Result<Arc<dyn ApiPort>, HostError> {
        if let Some(existing) = &state.dra_api {
            return Ok(existing.clone());
        }
        let connected = crate::dra_api::connect(
            self.options.kubeconfig.as_deref(),
            &resource.spec().config.file,
        )
        .await?;
        Ok(state.dra_api.insert(connected).clone())
    }

    /// Where DRA drivers live on this node.
    pub(crate) fn driver_paths(&self) -> DriverPaths {
        DriverPaths {
            plugins_dir: self.options.plugins_dir.clone(),
            plugins_registry_dir: self.options.plugins_registry_dir.clone(),
            cdi_dir: self.options.cdi_dir.clone(),
            state_dir: self.options.state_dir.clone(),
            node_name: self.options.node_name.clone(),
            instance: self.options.instance_id.clone(),
        }
    }
}
