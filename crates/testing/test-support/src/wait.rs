//! A bounded wait for something a test expects to happen soon.

use std::time::Duration;

/// Calls `probe` every `every` until it answers `Ok`, and returns that
/// value; panics once `limit` has passed, with `probe`'s last `Err` (what
/// it saw instead, e.g. the log or metrics so far). For the events that
/// have nothing to await (a file growing, a metric changing), where a
/// short poll under a generous bound is the honest wait.
pub async fn eventually<T>(
    limit: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = tokio::time::Instant::now() + limit;
    let mut interval = tokio::time::interval(every);
    loop {
        interval.tick().await;
        match probe().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                tokio::time::Instant::now() < deadline,
                "not within {limit:?}: {seen}"
            ),
        }
    }
}
