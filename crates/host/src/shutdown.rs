//! Stopping the whole host: every resource, hand-over and draining DRA
//! driver at once, gracefully or for a process that exits next.

use wdp_dra_driver::Draining;

use crate::api_switch::Handover;
use crate::running::Running;
use crate::state::Stopping;
use crate::supervisor::Host;

impl Host {
    /// Stops every resource, all at once: streams end, sockets go.
    ///
    /// The folder watches go first, so that nothing reacts to the sockets
    /// this removes. (A process about to exit calls [`wdp_fs_watch::close`]
    /// before this and finishes what it returns beside it: the watches'
    /// kernel marks are removed and reaped beside the shutdown.)
    pub async fn shutdown(&self) {
        self.stop_everything(Exit::NotYet).await;
    }

    /// As [`shutdown`](Self::shutdown), for a process that exits as soon as
    /// it returns: device-plugin sockets are removed and the calls in
    /// progress answered, but the kubelet's connections to them are left
    /// for the exit to close, so the kubelet reacts once the process is
    /// gone rather than beside its exit (see
    /// `wdp_kubelet_socket::ServedSocket::unlink_before_exit`). DRA drivers
    /// stop as in `shutdown`.
    pub async fn shutdown_before_exit(&self) {
        self.stop_everything(Exit::Next).await;
    }

    /// The process's last step: every folder watch is detached first (no
    /// handler runs again, and the shutdown's own watch drops remove
    /// nothing); the kernel watches then go on a blocking thread, a few
    /// hundred microseconds apart, while [`Host::shutdown_before_exit`]
    /// removes the sockets, and the inotify instance closes last: closing it
    /// then waits an expedited grace period, not a normal one of 10-30 ms
    /// (see `wdp_fs_watch::close`). The sockets do not wait for the watches,
    /// nor the watches for the sockets; the kubelet's connections close with
    /// the process. Nothing in the process may watch a folder afterwards.
    pub async fn stop_before_exit(&self) {
        let inotify = wdp_fs_watch::close();
        let inotify = tokio::task::spawn_blocking(move || inotify.finish());
        self.shutdown_before_exit().await;
        let _ = inotify.await;
    }

    async fn stop_everything(&self, exit: Exit) {
        let stopping = {
            let mut state = self.state.lock().await;
            // Marked before the shutdown token stops them.
            if let Exit::Next = exit {
                state.running.values().for_each(Running::exit_when_stopped);
            }
            self.shutdown.cancel();
            state.take_for_shutdown()
        };
        let Stopping {
            watchers,
            handovers,
            running,
        } = stopping;
        drop(watchers);
        // Retiring device-plugin servers of resources moving to DRA stop
        // (their sockets go) beside everything else.
        futures::future::join(
            futures::future::join_all(handovers.into_values().map(Handover::finish)),
            futures::future::join_all(running.into_values().map(Running::stop)),
        )
        .await;
        let draining = std::mem::take(&mut self.state.lock().await.draining);
        futures::future::join_all(draining.into_iter().map(Draining::stop)).await;
    }
}

/// Whether the process exits once a shutdown returns.
#[derive(Clone, Copy, Debug)]
enum Exit {
    /// Not yet (a test, an embedder): everything closes gracefully.
    NotYet,
    /// Next: the kubelet's connections are left for the exit to close.
    Next,
}
