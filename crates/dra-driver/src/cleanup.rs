//! What no one else would clean, done once when a driver starts.
//!
//! Prepared claims the API server no longer has (deleted, or deleted and
//! re-created under a new UID, while the host was down) are unprepared:
//! their CDI spec and checkpoint record go, each logged. A ResourceClaim
//! cannot be deleted while a pod uses it, so a claim the server does not
//! have is one no container needs. While the server cannot be reached the
//! pass is tried again, waiting longer each time.
//!
//! CDI specs of this resource's claims that the checkpoint does not record
//! (the host stopped between writing a claim's spec and recording it) are
//! removed once they are older than any prepare in progress can be, and so
//! are device metadata files no record names.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::api_port::{ApiPort, ApiPortError};
use crate::claim::ClaimRef;
use crate::device_metadata;
use crate::prepare::ClaimPreparer;

/// A CDI spec younger than this may belong to a prepare in progress (the
/// kubelet gives a call 45 s).
const UNRECORDED_SPEC_AGE: Duration = Duration::from_secs(300);
/// The first wait before trying again while the API server cannot answer.
const FIRST_RETRY: Duration = Duration::from_secs(5);
/// The longest wait between tries.
const LAST_RETRY: Duration = Duration::from_secs(300);

/// Runs the start-up cleanup of `preparer`'s driver (see the module docs)
/// until it is done or `stop` is cancelled.
pub async fn clean_up(
    preparer: Arc<ClaimPreparer>,
    api: Arc<dyn ApiPort>,
    stop: CancellationToken,
) {
    let driver = preparer.driver().to_owned();
    for path in preparer.unrecorded_specs(UNRECORDED_SPEC_AGE).await {
        match std::fs::remove_file(&path) {
            Ok(()) => {
                tracing::info!(%driver, cdi_spec = %path.display(), "removed a claim's CDI spec that no prepared claim records (the host stopped while preparing it)")
            }
            Err(error) => {
                tracing::warn!(%driver, cdi_spec = %path.display(), %error, "cannot remove a claim's CDI spec that no prepared claim records")
            }
        }
    }
    for path in preparer.unrecorded_metadata(UNRECORDED_SPEC_AGE).await {
        match device_metadata::remove_unrecorded_file(&path) {
            Ok(()) => {
                tracing::info!(%driver, device_metadata = %path.display(), "removed a claim's device metadata file that no prepared claim records (the host stopped while preparing it)")
            }
            Err(error) => {
                tracing::warn!(%driver, %error, "cannot remove a claim's device metadata file that no prepared claim records")
            }
        }
    }
    let mut wait = FIRST_RETRY;
    loop {
        let unreachable = tokio::select! {
            _ = stop.cancelled() => return,
            unreachable = unprepare_gone_claims(&preparer, api.as_ref()) => unreachable,
        };
        let Some(error) = unreachable else {
            return;
        };
        tracing::warn!(%driver, %error, "cannot check the prepared claims against the API server; trying again in {wait:?}");
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(LAST_RETRY);
    }
}

/// One pass: unprepares each prepared claim the API server does not have;
/// returns an error of the API server if some claim could not be checked.
async fn unprepare_gone_claims(
    preparer: &ClaimPreparer,
    api: &dyn ApiPort,
) -> Option<ApiPortError> {
    let mut unreachable = None;
    for (uid, record) in preparer.prepared_claims().await {
        let claim = ClaimRef {
            namespace: record.namespace.clone(),
            name: record.name.clone(),
            uid: uid.clone(),
        };
        let why = match api.read_claim(&claim).await {
            Ok(None) => "it no longer exists in the API server".to_owned(),
            Ok(Some(found)) => match found.metadata.uid.as_deref() {
                Some(other) if other != uid => {
                    format!("the API server's claim of that name is another one (UID {other})")
                }
                _ => continue,
            },
            Err(error) => {
                unreachable = Some(error);
                continue;
            }
        };
        match preparer.unprepare(&claim).await {
            Ok(()) => {
                tracing::info!(driver = %preparer.driver(), %claim, "unprepared a claim at start: {why}")
            }
            Err(error) => {
                tracing::warn!(driver = %preparer.driver(), %claim, %error, "cannot unprepare a claim that is gone ({why})")
            }
        }
    }
    unreachable
}
