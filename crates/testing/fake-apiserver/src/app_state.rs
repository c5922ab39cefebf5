//! What the HTTP handlers of one server generation share: the store, the refusing switch, the
//! write throttle and the generation's stop signal.

use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::faults::Faults;
use crate::store::Store;
use crate::throttle::Throttling;

/// What the handlers of one server generation share.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: Arc<Store>,
    pub(crate) refusing: watch::Receiver<bool>,
    /// Refuses ResourceSlice writes with a Retry-After while set; logs every write.
    pub(crate) throttling: Arc<Throttling>,
    /// Bearer tokens required, garbage answers.
    pub(crate) faults: Arc<Faults>,
    /// Cancelled when this generation of the server stops (restart or drop).
    pub(crate) stop: CancellationToken,
}
