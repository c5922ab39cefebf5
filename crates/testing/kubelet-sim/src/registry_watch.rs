//! The plugin watcher's folder side, shared by every plugin type the
//! stand-ins handle (device plugins in [`crate::plugin_watcher`], DRA
//! drivers in [`crate::dra`]).
//!
//! [`RegistryWatch`] watches a plugins registry folder the way the
//! kubelet's plugin watcher does: whatever is there at start counts as
//! created, a file renamed in counts as created and one renamed away as
//! removed, names starting with `.` and anything that is not a socket are
//! ignored, and a socket is handed to the [`SocketHandler`] once per inode.
//! A socket that cannot be dialled yet (bound but not listening) is tried
//! again shortly, as the kubelet's reconciler does. A removed socket is
//! handed to [`SocketHandler::deregister`].
//!
//! The registration-socket calls every plugin type makes, `GetInfo` and
//! `NotifyRegistrationStatus`, are here too ([`open_registration`],
//! [`notify_status`]); they dial like the kubelet ([`crate::kubelet_dial`]).

use std::collections::HashMap;
use std::future::Future;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use notify::event::{ModifyKind, RenameMode};
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use wdp_kubelet_api::pluginregistration::{
    InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse,
};

use crate::error::SimError;
use crate::kubelet_dial::{DialError, KubeletStyleConn};

const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
const NOTIFY: &str = "/pluginregistration.Registration/NotifyRegistrationStatus";
/// How long the kubelet waits for `GetInfo`.
const GET_INFO_LIMIT: Duration = Duration::from_secs(1);
/// How long the kubelet waits for `NotifyRegistrationStatus`.
const NOTIFY_LIMIT: Duration = Duration::from_secs(5);
/// How soon a socket that could not be dialled is tried again.
const REDIAL_AFTER: Duration = Duration::from_millis(100);

/// A boxed future the watcher awaits; handlers are trait objects.
pub(crate) type HandlerFuture<'a> = Pin<Box<dyn Future<Output = Handled> + Send + 'a>>;

/// What became of one socket handed to a [`SocketHandler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handled {
    /// Registered, refused or failed for good: not tried again.
    Done,
    /// The socket could not be dialled yet: try again shortly.
    NotYet,
}

/// One plugin type's registration logic (the kubelet's `PluginHandler`).
pub(crate) trait SocketHandler: Send + Sync + 'static {
    /// Registers the plugin behind `socket`. `stop` is cancelled when this
    /// watcher instance stops; streams the registration opens end with it.
    fn register(&self, socket: PathBuf, stop: CancellationToken) -> HandlerFuture<'_>;

    /// The socket at `socket` was removed: forget its plugin.
    fn deregister(&self, socket: &Path);
}

/// A running folder watch that can be stopped and started again.
pub(crate) struct RegistryWatch {
    dir: PathBuf,
    handler: Arc<dyn SocketHandler>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl RegistryWatch {
    /// Creates `dir` if missing and starts watching it.
    pub(crate) fn start(dir: &Path, handler: Arc<dyn SocketHandler>) -> Result<Self, SimError> {
        std::fs::create_dir_all(dir).map_err(|source| SimError::Bind {
            path: dir.to_owned(),
            source,
        })?;
        let stop = CancellationToken::new();
        let task = spawn_watch(dir, stop.clone(), handler.clone())?;
        Ok(Self {
            dir: dir.to_owned(),
            handler,
            stop,
            task,
        })
    }

    /// The kubelet's restart, first half: stop this instance (its streams
    /// end with it), wait until nothing of it can register any more, and
    /// delete every socket in the folder.
    pub(crate) async fn stop_and_clean(&mut self) {
        self.stop.cancel();
        let _ = (&mut self.task).await;
        remove_sockets(&self.dir);
    }

    /// The kubelet's restart, second half: watch the folder again.
    pub(crate) fn resume(&mut self) -> Result<(), SimError> {
        self.stop = CancellationToken::new();
        self.task = spawn_watch(&self.dir, self.stop.clone(), self.handler.clone())?;
        Ok(())
    }
}

impl Drop for RegistryWatch {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

enum Seen {
    Created(PathBuf),
    Removed(PathBuf),
}

fn watch_error(dir: &Path, error: notify::Error) -> SimError {
    SimError::Bind {
        path: dir.to_owned(),
        source: std::io::Error::other(error),
    }
}

/// Starts watching `dir` until `stop` is cancelled.
fn spawn_watch(
    dir: &Path,
    stop: CancellationToken,
    handler: Arc<dyn SocketHandler>,
) -> Result<JoinHandle<()>, SimError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let events = tx.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        for path in event.paths {
            // fsnotify, as the kubelet uses it, reports a file renamed into
            // the folder as created and one renamed away as removed.
            let seen = match event.kind {
                EventKind::Create(_) | EventKind::Modify(ModifyKind::Name(RenameMode::To)) => {
                    Seen::Created(path)
                }
                EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(RenameMode::From)) => {
                    Seen::Removed(path)
                }
                _ => continue,
            };
            let _ = events.send(seen);
        }
    })
    .map_err(|e| watch_error(dir, e))?;
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(|e| watch_error(dir, e))?;
    // Like the kubelet at start: whatever is already there counts as created.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let _ = tx.send(Seen::Created(entry.path()));
        }
    }
    let retry = tx;
    Ok(tokio::spawn(async move {
        let _watcher = watcher;
        // Sockets handled, by inode: a socket seen twice (the first walk
        // and its creation event) is registered once.
        let mut handled = HashMap::<PathBuf, u64>::new();
        loop {
            let seen = tokio::select! {
                _ = stop.cancelled() => return,
                seen = rx.recv() => match seen { Some(s) => s, None => return },
            };
            match seen {
                Seen::Created(path) => {
                    let Ok(meta) = std::fs::symlink_metadata(&path) else {
                        continue;
                    };
                    let hidden = path
                        .file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'));
                    if hidden || !meta.file_type().is_socket() {
                        continue;
                    }
                    if handled.insert(path.clone(), meta.ino()) == Some(meta.ino()) {
                        continue;
                    }
                    let outcome = tokio::select! {
                        _ = stop.cancelled() => return,
                        outcome = handler.register(path.clone(), stop.clone()) => outcome,
                    };
                    if outcome == Handled::NotYet {
                        // Like the kubelet's reconciler: try again shortly
                        // (a socket is created by bind() before listen()).
                        handled.remove(&path);
                        let retry = retry.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(REDIAL_AFTER).await;
                            let _ = retry.send(Seen::Created(path));
                        });
                    }
                }
                Seen::Removed(path) => {
                    handled.remove(&path);
                    handler.deregister(&path);
                }
            }
        }
    }))
}

/// Why [`open_registration`] did not get a `PluginInfo`.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The socket does not accept connections yet: try again.
    NotYet(DialError),
    /// `GetInfo` failed; the reason, for the failure list.
    GetInfo(DialError),
}

/// Dials a registration socket like the kubelet and calls `GetInfo`.
pub(crate) async fn open_registration(
    socket: &Path,
) -> Result<(KubeletStyleConn, PluginInfo), OpenError> {
    let mut conn = KubeletStyleConn::connect(socket)
        .await
        .map_err(OpenError::NotYet)?;
    let info = conn
        .unary(GET_INFO, &InfoRequest {}, GET_INFO_LIMIT)
        .await
        .map_err(OpenError::GetInfo)?;
    Ok((conn, info))
}

/// `NotifyRegistrationStatus`, with the kubelet's 5 s limit.
pub(crate) async fn notify_status(
    conn: &mut KubeletStyleConn,
    registered: bool,
    error: String,
) -> Result<RegistrationStatusResponse, DialError> {
    let status = RegistrationStatus {
        plugin_registered: registered,
        error,
    };
    conn.unary(NOTIFY, &status, NOTIFY_LIMIT).await
}

/// Deletes every socket in `dir`, as the kubelet's `CleanupPluginDirectory`
/// does for the device-plugin folder and its restart for the registry.
pub(crate) fn remove_sockets(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_socket()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
