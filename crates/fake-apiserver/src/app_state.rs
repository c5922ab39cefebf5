//! What the HTTP handlers of one server generation share: the store, the refusing switch and
//! the generation's stop signal.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::store::Store;

/// What the handlers of one server generation share.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) refusing: watch::Receiver<bool>,
    /// Cancelled when this generation of the server stops (restart or drop).
    pub(crate) stop: CancellationToken,
}
