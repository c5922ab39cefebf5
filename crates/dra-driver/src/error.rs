//! What stops a DRA driver from being served.

use std::path::PathBuf;

/// A DRA resource that cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum DraError {
    /// No client for the Kubernetes API server could be made (no
    /// in-cluster configuration, an unreadable kubeconfig).
    #[error("{}: DRA: no Kubernetes API client: {source}", file.display())]
    NoApiClient {
        /// The DRA resource file that needs it.
        file: PathBuf,
        /// The client's error.
        #[source]
        source: wdp_dra_client::ApiError,
    },
    /// A device whose ID cannot become a DRA device name.
    #[error("{}: DRA: {problem}", file.display())]
    UnnamedDevice {
        /// The resource file.
        file: PathBuf,
        /// Which device, and why.
        problem: String,
    },
}
