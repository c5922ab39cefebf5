//! [`SimError`]: what the simulated kubelets report when serving, dialling
//! or admitting fails.

use std::path::PathBuf;
use std::time::Duration;

use tonic::Status;

/// Errors of the simulated kubelet.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The kubelet's registration socket could not be served.
    #[error("cannot serve {path}: {source}")]
    Bind {
        /// The socket (`kubelet.sock` in the simulated kubelet's folder).
        path: PathBuf,
        /// Why binding or listening failed.
        #[source]
        source: std::io::Error,
    },
    /// An RPC or an admission named a resource that has not registered.
    #[error("resource {0} is not registered")]
    NotRegistered(String),
    /// A wait ran out: how long was waited, and for what.
    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(Duration, String),
    /// The plugin's socket could not be dialled back.
    #[error("cannot dial plugin {path}: {source}")]
    Dial {
        /// The plugin's socket.
        path: PathBuf,
        /// The transport's error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A device-plugin RPC returned an error status.
    #[error("{rpc} failed: {status}")]
    Rpc {
        /// The RPC, e.g. `Allocate`.
        rpc: &'static str,
        /// The status the plugin answered.
        status: Box<Status>,
    },
    /// A call named a DRA driver that has not registered.
    #[error("DRA driver {0} is not registered")]
    DriverNotRegistered(String),
    /// A plugin's answer broke the protocol in a way the kubelet rejects
    /// as a whole (e.g. a DRA result for a claim it did not ask for).
    #[error("{rpc}: {problem}")]
    BadResponse {
        /// The RPC, e.g. `NodePrepareResources`.
        rpc: &'static str,
        /// What was wrong with the answer.
        problem: String,
    },
    /// An admission could not go ahead (too few healthy free devices, or
    /// an `Allocate` answer without a container response).
    #[error("admission refused: {0}")]
    Admission(String),
}

impl SimError {
    /// A device-plugin or DRA RPC answered `status`.
    pub(crate) fn rpc(rpc: &'static str, status: Status) -> Self {
        SimError::Rpc {
            rpc,
            status: Box::new(status),
        }
    }
}
