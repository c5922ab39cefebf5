//! Call observation: every finished hook call is told, as a
//! [`CallEvent`], to the engine's [`CallObserver`] (metrics).

use std::time::Duration;

use crate::error::CallErrorKind;
use crate::hook::Hook;

/// One finished hook call, as told to a [`CallObserver`].
#[derive(Clone, Copy, Debug)]
pub struct CallEvent<'a> {
    /// Guest name.
    pub guest: &'a str,
    /// The hook called.
    pub hook: Hook,
    /// [`CallContext::resource`](crate::CallContext::resource).
    pub resource: &'a str,
    /// Wall time of the call, instantiation included.
    pub duration: Duration,
    /// `None` on success.
    pub error: Option<CallErrorKind>,
}

/// Told about every finished call (wire it to metrics); set in
/// [`EngineSettings::observer`](crate::EngineSettings::observer). Must be
/// cheap: it runs on the calling thread.
pub trait CallObserver: Send + Sync {
    /// One call finished.
    fn call_finished(&self, event: &CallEvent<'_>);
}

impl<F> CallObserver for F
where
    F: Fn(&CallEvent<'_>) + Send + Sync,
{
    fn call_finished(&self, event: &CallEvent<'_>) {
        self(event)
    }
}
