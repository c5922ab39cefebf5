//! What start-up leaves behind: code (config parsing, guest loading,
//! server set-up, registration) that serving does not run again, and heap
//! it freed. Once every resource is registered, or after a minute at most,
//! both go back to the kernel through `wdp-memory` (about 6 MiB of RSS;
//! code serving runs faults back in from the page cache).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::supervisor::Host;

/// The longest wait for every resource to be registered.
const READY_WAIT: Duration = Duration::from_secs(60);
/// How often readiness is looked at meanwhile.
const READY_POLL: Duration = Duration::from_millis(100);

impl Host {
    /// Waits until the host is ready (or a minute has passed), then hands
    /// start-up's code pages and freed heap back to the kernel. Spawn it
    /// once after [`Host::start`].
    pub async fn release_start_up_code(self: Arc<Self>) {
        let started = Instant::now();
        while !self.ready().await && started.elapsed() < READY_WAIT {
            tokio::time::sleep(READY_POLL).await;
        }
        // Reading `/proc/self/smaps` and `madvise` take a millisecond or so:
        // on a blocking thread, not a runtime worker serving the kubelet.
        let released = tokio::task::spawn_blocking(|| {
            wdp_memory::release_free_memory();
            wdp_memory::release_unused_code_pages()
        })
        .await
        .unwrap_or_default();
        tracing::debug!(
            released_kib = released / 1024,
            "unmapped the start-up code pages"
        );
    }
}
