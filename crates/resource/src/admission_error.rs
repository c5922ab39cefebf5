//! Why an admission (preferred allocation, allocate, pre-start, a DRA
//! prepare action) was refused, whichever protocol asked. Each transport
//! maps it to its own answer: the device plugin to a gRPC status, the DRA
//! driver to the claim's error. The message is the same for both; a
//! guest's failure or refusal names the guest and hook ([`AdmissionError::blamed`]).

use wdp_policy::Hook;

use crate::guest_call::GuestFailure;

/// An admission refused.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The request cannot be served as asked: it names an unknown,
    /// unhealthy or repeated device, a must-include device that is not
    /// available, or an allocation size that cannot be met.
    #[error("{0}")]
    InvalidRequest(String),
    /// The answer does not fit the kubelet's message limit.
    #[error("{0}")]
    AnswerTooLarge(String),
    /// The built-in pre-start check found a device's node gone.
    #[error("device {device:?}: node {node} is gone")]
    NodeGone {
        /// The device ID.
        device: String,
        /// The node's path.
        node: String,
    },
    /// The pre-start guest refused the devices (its answer, not a fault).
    #[error("pre-start refused: {0}")]
    PreStartRefused(GuestFailure),
    /// A guest failed (trap, deadline, invalid answer, ...) and its hook's
    /// `on-error` is `fail`.
    #[error(transparent)]
    GuestFailed(GuestFailure),
    /// The `dra-prepare` or `dra-unprepare` guest failed or refused.
    #[error("{}: {failure}", hook.interface())]
    DraAction {
        /// [`Hook::DraPrepare`] or [`Hook::DraUnprepare`].
        hook: Hook,
        /// What went wrong.
        failure: GuestFailure,
    },
}

impl AdmissionError {
    /// The guest and hook at fault, when a guest's failure or refusal
    /// caused the refusal: the refused RPC's log line carries them as
    /// every guest event does.
    pub fn blamed(&self) -> Option<(&str, Hook)> {
        match self {
            Self::PreStartRefused(failure)
            | Self::GuestFailed(failure)
            | Self::DraAction { failure, .. } => Some(failure.guest_and_hook()),
            Self::InvalidRequest(_) | Self::AnswerTooLarge(_) | Self::NodeGone { .. } => None,
        }
    }

    /// Whether a guest ran out of time (its deadline, or the host's
    /// backstop after it).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::GuestFailed(failure) if failure.is_timeout())
    }
}
