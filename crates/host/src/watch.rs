//! The two folders the host watches through the process's one inotify
//! instance ([`wdp_fs_watch`]): the config directory
//! (every change but a mere access is a reason to reload) and the
//! device-plugin folder (the kubelet's socket created again, or a socket
//! removed, are what device-plugin servers act on).

use std::path::Path;
use std::sync::Arc;

use tokio::sync::broadcast;
use wdp_device_plugin::FolderEvent;
use wdp_fs_watch::{EventKind, FolderWatch, RecursiveMode};
use wdp_kubelet_api::v1beta1;

use crate::error::HostError;
use crate::metrics::Metrics;

/// One message per change in the config directory.
pub(crate) type ChangeEvents = tokio::sync::mpsc::UnboundedReceiver<()>;

/// Watches the config directory recursively; every change but a mere
/// access sends one message.
pub(crate) fn watch_config_dir(dir: &Path) -> Result<(FolderWatch, ChangeEvents), HostError> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let fail = |source| HostError::Watch {
        dir: dir.to_owned(),
        source,
    };
    let watcher = FolderWatch::new(move |event| {
        if let Ok(event) = event
            && !matches!(event.kind, EventKind::Access(_))
        {
            let _ = tx.send(());
        }
    });
    watcher.watch(dir, RecursiveMode::Recursive).map_err(fail)?;
    Ok((watcher, rx))
}

/// Watches the device-plugin folder and sends what every device-plugin
/// server needs to hear: `kubelet.sock` created (a kubelet restart,
/// counted in `metrics`) and any file removed or renamed away.
pub(crate) fn watch_plugin_dir(
    dir: &Path,
    events: broadcast::Sender<FolderEvent>,
    metrics: Arc<Metrics>,
) -> Result<FolderWatch, HostError> {
    let fail = |source| HostError::Watch {
        dir: dir.to_owned(),
        source,
    };
    let watcher = FolderWatch::new(move |event| {
        let Ok(event) = event else { return };
        for path in &event.paths {
            let Some(file) = path.file_name().and_then(|f| f.to_str()) else {
                continue;
            };
            match event.kind {
                EventKind::Create(_) if file == v1beta1::KUBELET_SOCKET => {
                    metrics.host.kubelet_restarts.inc();
                    let _ = events.send(FolderEvent::KubeletSocketCreated);
                }
                EventKind::Remove(_)
                | EventKind::Modify(wdp_fs_watch::event::ModifyKind::Name(_)) => {
                    let _ = events.send(FolderEvent::Removed(file.to_owned()));
                }
                _ => {}
            }
        }
    });
    watcher
        .watch(dir, RecursiveMode::NonRecursive)
        .map_err(fail)?;
    Ok(watcher)
}
