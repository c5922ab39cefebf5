//! One Unix socket the kubelet dials, from bind to stop: the lifecycle a
//! resource's device-plugin socket, a DRA driver's socket and every
//! registration socket share.
//!
//! 1. **Bind** under a name the kubelet ignores (`.<name>.staging`), then
//!    rename into place: the kubelet never sees a socket that refuses
//!    connections. A failure is said at ERROR and tried again with
//!    [`Backoff`] until it binds or the server is stopped.
//! 2. **Serve** the caller's gRPC services on it (through
//!    [`AuthorityFix`] where the kubelet sends a socket path as
//!    `:authority`).
//! 3. **Notice removal:** the path no longer names the socket bound (a
//!    kubelet restart cleans its folders). A watch on the folder wakes
//!    [`ServedSocket::removed`] at once; a once-a-second look at the
//!    path's inode backs it up.
//! 4. **Close:** unlink first, so nothing new connects (for a registration
//!    socket, that is what deregisters), then end the server: its streams
//!    end only once the socket is gone.
//! 5. **Registered** is false from each bind until the caller learns
//!    otherwise (`Register`'s answer, `NotifyRegistrationStatus`), and
//!    after the socket closes.
//!
//! A server's loop is: [`SocketServer::serve`], then the caller's own watch
//! (until [`ServedSocket::removed`], the stop token, or an event of its
//! own), then [`ServedSocket::close`], then serve again or return.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UnixListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tokio_util::sync::CancellationToken;
use tonic::service::Routes;
use wdp_fs_watch::{EventKind, FolderWatch, RecursiveMode};

use crate::authority::AuthorityFix;
use crate::backoff::Backoff;

/// How often the path's inode is looked at besides the folder watch.
const REMOVAL_RECHECK: Duration = Duration::from_secs(1);

/// Serves one kind of socket again and again: binds with backoff, and
/// keeps the registration state's resets in one place.
pub struct SocketServer {
    span: tracing::Span,
    what: &'static str,
    authority_fix: bool,
    registered: Arc<watch::Sender<bool>>,
    backoff: Backoff,
    stop: CancellationToken,
}

impl std::fmt::Debug for SocketServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketServer")
            .field("what", &self.what)
            .field("authority_fix", &self.authority_fix)
            .finish_non_exhaustive()
    }
}

impl SocketServer {
    /// A server of `what` (`"socket"`, `"DRA socket"`, `"registration
    /// socket"`: words for its log lines, which it writes inside `span`,
    /// the caller's fields naming the resource or driver). `registered` is
    /// reset at each bind and at the end; `stop` ends every wait.
    pub fn new(
        span: tracing::Span,
        what: &'static str,
        registered: Arc<watch::Sender<bool>>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            span,
            what,
            authority_fix: false,
            registered,
            backoff: Backoff::new(),
            stop,
        }
    }

    /// Connections pass through [`AuthorityFix`]: for sockets the kubelet
    /// dials by path with no authority (registration and DRA sockets).
    pub fn with_authority_fix(mut self) -> Self {
        self.authority_fix = true;
        self
    }

    /// The token that stops this server's waits.
    pub fn stop_token(&self) -> &CancellationToken {
        &self.stop
    }

    /// Binds `path` (retrying with backoff) and serves the routes `routes`
    /// builds from the server's own stop token (ended at
    /// [`ServedSocket::close`], after the unlink: streams watching it end
    /// then). `None` once stopped.
    pub async fn serve(
        &mut self,
        path: &Path,
        routes: impl FnOnce(CancellationToken) -> Routes,
    ) -> Option<ServedSocket> {
        let listener = loop {
            self.registered.send_replace(false);
            match bind_staged(path) {
                Ok(listener) => break listener,
                Err(error) => {
                    let wait = self.backoff.step();
                    self.span.in_scope(|| {
                        tracing::error!(socket = %path.display(), %error, "cannot serve the {}; retrying in {wait:?}", self.what);
                    });
                    tokio::select! {
                        _ = self.stop.cancelled() => return None,
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            }
        };
        self.backoff.reset();
        let removed = Arc::new(Notify::new());
        // Without a watcher the once-a-second check still notices.
        let watcher = watch_removal(path, removed.clone());
        let inode = inode(path);
        let server_stop = CancellationToken::new();
        let server = spawn_server(
            listener,
            routes(server_stop.clone()),
            self.authority_fix,
            server_stop.clone(),
        );
        self.span.in_scope(|| {
            tracing::info!(socket = %path.display(), "serving the {}", self.what);
        });
        Some(ServedSocket {
            span: self.span.clone(),
            what: self.what,
            path: path.to_owned(),
            inode,
            removed,
            removal_watcher: watcher,
            server_stop,
            server,
            registered: self.registered.clone(),
        })
    }
}

/// A socket bound and served, until [`Self::close`].
pub struct ServedSocket {
    span: tracing::Span,
    what: &'static str,
    path: PathBuf,
    inode: Option<u64>,
    removed: Arc<Notify>,
    /// Dropped first at [`ServedSocket::close`], so that the unlink that
    /// follows is not taken for a removal.
    removal_watcher: Option<FolderWatch>,
    server_stop: CancellationToken,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
    registered: Arc<watch::Sender<bool>>,
}

impl std::fmt::Debug for ServedSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServedSocket")
            .field("what", &self.what)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// What [`ServedSocket::close`] does with the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unlink {
    /// Remove it while it is still ours (stopping, or its name changes).
    IfOurs,
    /// Leave it (it was removed or replaced already).
    No,
}

impl ServedSocket {
    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the path still names the socket bound.
    pub fn is_ours(&self) -> bool {
        inode(&self.path) == self.inode
    }

    /// Resolves once the path no longer names the socket bound.
    pub async fn removed(&self) {
        loop {
            tokio::select! {
                _ = self.removed.notified() => {}
                _ = tokio::time::sleep(REMOVAL_RECHECK) => {}
            }
            if !self.is_ours() {
                return;
            }
        }
    }

    /// Unlinks the path as `unlink` says, then ends the server (its streams
    /// end after the unlink, so nothing sees one end while the socket
    /// lingers) and waits for it. Registered is false afterwards.
    pub async fn close(mut self, unlink: Unlink) {
        drop(self.removal_watcher.take());
        if unlink == Unlink::IfOurs && self.is_ours() {
            let _ = std::fs::remove_file(&self.path);
        }
        self.server_stop.cancel();
        let outcome = self.server.await;
        let _span = self.span.enter();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "the {} server ended with an error", self.what)
            }
            Err(error) => tracing::warn!(%error, "the {} server task failed", self.what),
        }
        self.registered.send_replace(false);
    }

    /// For a process about to exit: unlinks the path (while it is still
    /// ours) and leaves the server and its connections as they are, for the
    /// exit to close. The kubelet then hears nothing until the process is
    /// gone, instead of answering a graceful close (GOAWAY, a ping's round
    /// trip) while the process still has its exit to do: on a node short of
    /// cores the two compete. The server goes on answering until the exit:
    /// a caller that wants the calls in progress answered waits for them
    /// after this (the device-plugin server does). Registered is false
    /// afterwards.
    pub fn unlink_before_exit(mut self) {
        drop(self.removal_watcher.take());
        if self.is_ours() {
            let _ = std::fs::remove_file(&self.path);
        }
        self.registered.send_replace(false);
    }
}

/// The inode `path` names now, if any.
pub fn inode(path: &Path) -> Option<u64> {
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Binds a listener at `path`: at a hidden staging name first, renamed
/// into place once listening. The folder is created if missing.
fn bind_staged(path: &Path) -> std::io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let staging = path.with_file_name(format!(
        ".{}.staging",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let _ = std::fs::remove_file(&staging);
    let listener = UnixListener::bind(&staging)?;
    if let Err(error) = std::fs::rename(&staging, path) {
        let _ = std::fs::remove_file(&staging);
        return Err(error);
    }
    Ok(listener)
}

fn spawn_server(
    listener: UnixListener,
    routes: Routes,
    authority_fix: bool,
    stop: CancellationToken,
) -> JoinHandle<Result<(), tonic::transport::Error>> {
    let server = tonic::transport::Server::builder().add_routes(routes);
    let incoming = UnixListenerStream::new(listener);
    if authority_fix {
        let incoming = incoming.map(|conn| conn.map(AuthorityFix::new));
        tokio::spawn(server.serve_with_incoming_shutdown(incoming, stop.cancelled_owned()))
    } else {
        tokio::spawn(server.serve_with_incoming_shutdown(incoming, stop.cancelled_owned()))
    }
}

/// Wakes `removed` when `path` is removed or renamed away.
fn watch_removal(path: &Path, removed: Arc<Notify>) -> Option<FolderWatch> {
    let dir = path.parent()?.to_owned();
    let name = path.file_name()?.to_owned();
    let watcher = FolderWatch::new(move |event| {
        let Ok(event) = event else { return };
        if matches!(
            event.kind,
            EventKind::Remove(_) | EventKind::Modify(wdp_fs_watch::event::ModifyKind::Name(_))
        ) && event.paths.iter().any(|p| p.file_name() == Some(&name))
        {
            removed.notify_one();
        }
    });
    watcher.watch(&dir, RecursiveMode::NonRecursive).ok()?;
    Some(watcher)
}

#[cfg(test)]
#[path = "served_socket_tests.rs"]
mod tests;
