//! What stops a DRA driver from being served, and why a claim's guests
//! refused to prepare it.

use std::path::PathBuf;

use wdp_resource::AdmissionError;

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

/// Why a claim's devices were refused while being prepared: the
/// `dra-prepare` or `pre-start` step, or `allocate` (named in the message).
#[derive(Debug, thiserror::Error)]
pub enum ClaimAdmissionError {
    /// `dra-prepare` or `pre-start` (guest or built-in) refused or failed.
    #[error(transparent)]
    Prepare(#[from] AdmissionError),
    /// `allocate` (guest or built-in) refused or failed.
    #[error("allocate: {0}")]
    Allocate(#[source] AdmissionError),
}
