//! The DRA side's connection to the Kubernetes API server: made once, when
//! the first DRA resource is served (a host with only device-plugin
//! resources never talks to the API server), from `--kubeconfig` or the
//! in-cluster configuration.

use std::sync::Arc;

use crate::dra::service::ClaimReader;
use crate::error::HostError;
use crate::supervisor::HostOptions;

/// A reader of ResourceClaims through the API server.
///
/// Placeholder until `wdp_dra_client::{client, get_claim}` is merged:
/// every read fails with a message saying so, which each claim's entry
/// carries (the rest of the host is unaffected).
pub async fn claim_reader(options: &HostOptions) -> Result<ClaimReader, HostError> {
    let source = options.kubeconfig.as_ref().map_or_else(
        || "in-cluster configuration".to_owned(),
        |p| p.display().to_string(),
    );
    Ok(Arc::new(move |claim| {
        let source = source.clone();
        Box::pin(async move {
            Err(format!(
                "claim {claim}: this build has no Kubernetes API client yet ({source} not used)"
            ))
        })
    }))
}
