//! The crate's one error type for everything that talks to the API server.

use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

use crate::status_checks::StatusProblem;

/// A failure to reach, or to be accepted by, the Kubernetes API server.
///
/// Its `Display` says what was being done ("listing ResourceSlices of driver X
/// on node Y"); the cause is its `source`. [`ApiError::summary`] gives both on
/// one line, with the API server's own message for a rejected request.
#[derive(Debug, Error)]
pub enum ApiError {
    /// The kubeconfig file given could not be read or used.
    #[error("loading the kubeconfig {}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why it could not be used.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither the in-cluster service account nor `KUBECONFIG`/`~/.kube/config` gave a configuration.
    #[error(
        "finding the Kubernetes API server: not in a cluster ({in_cluster}), and no usable kubeconfig in KUBECONFIG or ~/.kube/config"
    )]
    NoConfiguration {
        /// Why the in-cluster configuration was not usable.
        in_cluster: kube::config::InClusterError,
        /// Why the kubeconfig was not usable.
        #[source]
        kubeconfig: kube::config::KubeconfigError,
    },
    /// The client could not be built from a configuration (TLS setup, proxy).
    #[error("building the Kubernetes API client")]
    BuildClient {
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A request failed: unreachable server, a 5xx, a conflict, a rejection.
    #[error("{action}")]
    Request {
        /// What was being done, naming the objects.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A request got no answer in time.
    #[error("{action}: no answer within {after:?}")]
    TimedOut {
        /// What was being done.
        action: String,
        /// How long it waited.
        after: Duration,
    },
    /// The ResourceClaim whose device status was to be written is gone.
    #[error("writing device status: {claim} is gone")]
    ClaimGone {
        /// `ResourceClaim namespace/name`.
        claim: String,
    },
    /// The ResourceClaim of that name is another one (deleted and made anew).
    #[error("writing device status: {claim} has UID {found}, not {expected}: it is another claim")]
    ClaimReplaced {
        /// `ResourceClaim namespace/name`.
        claim: String,
        /// The UID prepared.
        expected: String,
        /// The UID found.
        found: String,
    },
    /// Device status entries the API server would reject; nothing was written.
    #[error(
        "writing the device status of driver {driver} on {claim}: {}",
        join(problems)
    )]
    InvalidDeviceStatus {
        /// `ResourceClaim namespace/name`.
        claim: String,
        /// The driver writing.
        driver: String,
        /// Each problem, naming device and field.
        problems: Vec<StatusProblem>,
    },
    /// The publisher task ended before it could answer (it panicked or was aborted).
    #[error("{action}: the publisher task of {target} is gone")]
    PublisherGone {
        /// What was being done.
        action: String,
        /// The driver and node it published for.
        target: String,
    },
}

fn join(problems: &[StatusProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ApiError {
    /// A request error: `action` says what was being done.
    pub(crate) fn request(action: impl Into<String>, source: kube::Error) -> Self {
        ApiError::Request {
            action: action.into(),
            source,
        }
    }

    /// The HTTP status the API server answered with, if it answered.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            ApiError::Request {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }

    /// How long the API server asked the client to wait before trying again
    /// (`details.retryAfterSeconds` of its `Status`, which a layer of
    /// [`client()`](crate::client()) also fills from a `Retry-After`
    /// header); `None` when it did not ask.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ApiError::Request {
                source: kube::Error::Api(status),
                ..
            } => status
                .details
                .as_ref()
                .map(|details| details.retry_after_seconds)
                .filter(|&seconds| seconds > 0)
                .map(|seconds| Duration::from_secs(seconds.into())),
            _ => None,
        }
    }

    /// What was being done and why it failed, on one line. For an answer of
    /// the API server this is its status code, reason and message (which, for
    /// a 422, names the rejected field).
    pub fn summary(&self) -> String {
        let mut line = self.to_string();
        match self {
            ApiError::Request {
                source: kube::Error::Api(status),
                ..
            } => {
                line.push_str(&format!(": the API server answered {}", status.code));
                if !status.reason.is_empty() {
                    line.push_str(&format!(" {}", status.reason));
                }
                if !status.message.is_empty() {
                    line.push_str(&format!(": {}", status.message));
                }
            }
            _ => {
                let mut source = std::error::Error::source(self);
                while let Some(cause) = source {
                    let text = cause.to_string();
                    // kube's errors repeat their source in their own text.
                    if !line.contains(&text) {
                        line.push_str(&format!(": {text}"));
                    }
                    source = cause.source();
                }
            }
        }
        line.replace('\n', " ")
    }
}
