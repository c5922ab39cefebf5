//! A served resource and what serves it: a device-plugin server or a DRA
//! driver, beside the task that refreshes its device set.

use std::collections::BTreeSet;
use std::sync::Arc;

use wdp_device_plugin::ServerHandle;
use wdp_dra_driver::{DraDriver, Draining};
use wdp_resource::Resource;

/// How a running resource is served to the kubelet.
pub(crate) enum Serving {
    /// A device-plugin socket and its registration.
    DevicePlugin(ServerHandle),
    /// A DRA driver.
    Dra(DraDriver),
}

/// A served resource and the tasks that serve it.
pub(crate) struct Running {
    pub(crate) resource: Arc<Resource>,
    pub(crate) serving: Serving,
    pub(crate) refresher: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Stops refreshing and serving; the sockets go.
    pub(crate) async fn stop(self) {
        self.refresher.abort();
        self.resource.stop_watching();
        match self.serving {
            Serving::DevicePlugin(server) => server.stop().await,
            Serving::Dra(driver) => driver.stop().await,
        }
    }

    /// Marks it for a process that exits once it stops: a device-plugin
    /// server's socket then goes at [`stop`](Self::stop) but its kubelet
    /// connections are left for the exit to close
    /// ([`ServerHandle::exit_when_stopped`]). A DRA driver stops as ever.
    pub(crate) fn exit_when_stopped(&self) {
        if let Serving::DevicePlugin(server) = &self.serving {
            server.exit_when_stopped();
        }
    }

    /// Stops it for good (the resource left the configuration): as
    /// [`stop`](Self::stop), and a DRA driver's slices are deleted; a DRA
    /// driver with prepared claims goes on serving their unprepare, as the
    /// returned [`Draining`].
    pub(crate) async fn withdraw(self) -> Option<Draining> {
        match self.serving {
            Serving::Dra(driver) => {
                self.refresher.abort();
                driver.withdraw().await
            }
            serving @ Serving::DevicePlugin(_) => {
                Running { serving, ..self }.stop().await;
                None
            }
        }
    }

    /// Whether the kubelet accepted the resource's registration.
    pub(crate) fn is_registered(&self) -> bool {
        match &self.serving {
            Serving::DevicePlugin(server) => server.is_registered(),
            Serving::Dra(driver) => driver.is_registered(),
        }
    }

    /// Registers again (device-plugin options changed); a DRA driver's
    /// registration carries nothing a reload changes.
    pub(crate) fn reregister(&self) {
        if let Serving::DevicePlugin(server) = &self.serving {
            server.reregister();
        }
    }

    /// The DRA driver serving the resource, if it is one.
    pub(crate) fn dra(&self) -> Option<&DraDriver> {
        match &self.serving {
            Serving::Dra(driver) => Some(driver),
            Serving::DevicePlugin(_) => None,
        }
    }
}

/// Content hashes of the guest builds the `running` resources use.
pub(crate) fn builds_in_use<'a>(
    running: impl IntoIterator<Item = &'a Running>,
) -> BTreeSet<String> {
    running
        .into_iter()
        .flat_map(|r| {
            r.resource
                .spec()
                .guests
                .values()
                .map(|g| g.content_hash().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}
