//! Reading from the kubelet's PodResources API which devices of a resource
//! running containers hold through the device-plugin API.
//!
//! The kubelet serves `PodResourcesLister` on
//! `/var/lib/kubelet/pod-resources/kubelet.sock`; `List` answers every
//! active pod's containers with the device IDs each was given
//! (`devices[]`, per resource name: the device plugin's assignments, kept
//! from the kubelet's checkpoint while the pod runs, even after the plugin
//! went away) and its DRA claims (`dynamic_resources[]`). A
//! [`PodResourcesReader`] dials the socket afresh for every call (a kubelet
//! restart costs nothing), bounds each call by a timeout (a kubelet that
//! hangs is an error like any other) and answers typed errors naming the
//! socket, so that the caller can keep what it withholds and say why.
//!
//! The kubelet rate-limits the socket for all callers together (100 calls
//! a second, burst 10): one `List` a second per resource moving between
//! APIs is far below it, and `ResourceExhausted` is an error the caller
//! retries like the others.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use wdp_kubelet_api::pod_resources::v1::ListPodResourcesRequest;
use wdp_kubelet_api::pod_resources::v1::pod_resources_lister_client::PodResourcesListerClient;

/// Why the kubelet's PodResources API could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// The socket could not be dialled (missing, or nobody listening).
    #[error("cannot connect to the kubelet's PodResources socket {socket}: {source}")]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// What the dial said.
        #[source]
        source: tonic::transport::Error,
    },
    /// The call failed (refused, rate-limited, or an answer that is no
    /// valid `ListPodResourcesResponse`).
    #[error("the kubelet's PodResources List on {socket} failed: {}: {}", .status.code(), .status.message())]
    Call {
        /// The socket.
        socket: PathBuf,
        /// The gRPC status.
        #[source]
        status: tonic::Status,
    },
    /// No answer in time.
    #[error("the kubelet's PodResources List on {socket} did not answer within {after:?}")]
    Timeout {
        /// The socket.
        socket: PathBuf,
        /// How long it waited.
        after: Duration,
    },
}

/// Reads the kubelet's PodResources API on one socket.
#[derive(Clone, Debug)]
pub struct PodResourcesReader {
    socket: PathBuf,
    timeout: Duration,
}

impl PodResourcesReader {
    /// How long one call may take by default (dial included).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

    /// A reader of the PodResources socket at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// The same reader, giving up on a call after `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The socket it reads.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The device IDs of resource `resource_name` that containers of
    /// active pods hold through the device-plugin API, as the kubelet
    /// lists them (kubelet IDs: a replica's carries its suffix).
    pub async fn device_plugin_holdings(
        &self,
        resource_name: &str,
    ) -> Result<BTreeSet<String>, PodResourcesError> {
        let call = async {
            let channel = wdp_kubelet_api::connect_unix(self.socket.clone())
                .await
                .map_err(|source| PodResourcesError::Connect {
                    socket: self.socket.clone(),
                    source,
                })?;
            PodResourcesListerClient::new(channel)
                .list(ListPodResourcesRequest {})
                .await
                .map_err(|status| PodResourcesError::Call {
                    socket: self.socket.clone(),
                    status,
                })
        };
        let listed = tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| PodResourcesError::Timeout {
                socket: self.socket.clone(),
                after: self.timeout,
            })??
            .into_inner();
        Ok(listed
            .pod_resources
            .into_iter()
            .flat_map(|pod| pod.containers)
            .flat_map(|container| container.devices)
            .filter(|devices| devices.resource_name == resource_name)
            .flat_map(|devices| devices.device_ids)
            .collect())
    }
}

#[cfg(test)]
#[path = "pod_resources_tests.rs"]
mod tests;
