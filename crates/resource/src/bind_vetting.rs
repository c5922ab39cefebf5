//! A resource's `passthrough` guest (WIT 0.1.3): its say before the host
//! binds a claim's devices, with every function of their IOMMU groups, to
//! the resource's `bind-driver` ([`Resource::may_bind`]).
//!
//! The host's own refusals (the boot display, a network interface that is
//! up, a mounted disk, a group shared with another claim) are made first,
//! by the caller, and no guest can overrule them: this hook can only
//! refuse more. A resource without the hook lets every bind through. Like
//! the DRA prepare actions, a failed call never falls back to "yes",
//! whatever `on-error` says: a bind in doubt is not made.

use wdp_policy::types::BindRequest;
use wdp_policy::{CallError, Hook};

use crate::guest_call::GuestFailure;
use crate::resource::Resource;

/// Why a bind may not be made: the `passthrough` guest refused it, or
/// could not be asked. The message names the resource, the guest and the
/// hook.
#[derive(Debug, thiserror::Error)]
pub enum BindRefusal {
    /// The guest answered `Err(reason)`: its decision.
    #[error("resource {resource}: guest {guest:?} hook passthrough refused the bind: {reason}")]
    Refused {
        /// The resource.
        resource: String,
        /// The guest's name.
        guest: String,
        /// The guest's reason.
        reason: String,
    },
    /// The call failed (trap, deadline, memory cap, no answer): the bind is
    /// not made.
    #[error("resource {resource}: the bind was not vetted: {failure}")]
    Failed {
        /// The resource.
        resource: String,
        /// What went wrong, naming the guest and the hook.
        failure: GuestFailure,
    },
}

impl BindRefusal {
    /// The guest's own reason when it refused; `None` when the call failed.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Self::Refused { reason, .. } => Some(reason),
            Self::Failed { .. } => None,
        }
    }

    /// The guest at fault and its hook ([`Hook::Passthrough`]).
    pub fn guest_and_hook(&self) -> (&str, Hook) {
        match self {
            Self::Refused { guest, .. } => (guest, Hook::Passthrough),
            Self::Failed { failure, .. } => failure.guest_and_hook(),
        }
    }
}

impl Resource {
    /// Asks the resource's `passthrough` guest whether the host may make
    /// `request`'s bind (after the host's own checks passed); `Ok` when the
    /// resource has no such guest. Runs off the async workers' queues
    /// under the hook's limits, like every guest call.
    pub async fn may_bind(&self, request: &BindRequest) -> Result<(), BindRefusal> {
        let spec = self.spec();
        let Some((binding, guest)) = spec.bound(Hook::Passthrough) else {
            return Ok(());
        };
        let input = request.clone();
        let outcome = self
            .caller
            .call(
                &spec,
                binding,
                guest,
                self.present_candidates(),
                move |g, ctx| g.may_bind(ctx, &input),
                |()| Ok(()),
            )
            .await;
        let resource = spec.config.resource.clone();
        outcome.map_err(|failure| match failure {
            GuestFailure::Call(CallError::GuestError { guest, message, .. }) => {
                BindRefusal::Refused {
                    resource,
                    guest,
                    reason: message,
                }
            }
            failure => BindRefusal::Failed { resource, failure },
        })
    }
}
