//! The kubelet's device-manager checkpoint, as the stand-in keeps it:
//! `<device-plugin-dir>/kubelet_internal_checkpoint`, rewritten after every
//! change of what it knows, in the kubelet's format (Go field names;
//! `RegisteredDevices`: the device IDs of every plugin whose endpoint is
//! kept; `PodDeviceEntries`: one entry per running container holding
//! devices). Plugins read it to learn what the kubelet knows; a restart
//! that keeps pods keeps it, as the kubelet's does.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

use crate::state::SimState;

/// The file's name in the device-plugin folder.
pub const FILE_NAME: &str = "kubelet_internal_checkpoint";

/// Writes the checkpoint now and after every change of `state`, until the
/// stand-in is dropped.
pub(crate) fn keep_written(dir: &Path, state: &Arc<watch::Sender<SimState>>) {
    let path = dir.join(FILE_NAME);
    let mut changes = state.subscribe();
    write(&path, &changes.borrow_and_update());
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let content = changes.borrow_and_update().clone();
            write(&path, &content);
        }
    });
}

/// The checkpoint's JSON for `state`.
pub fn content(state: &SimState) -> serde_json::Value {
    let grace = state.endpoint_grace();
    let registered: serde_json::Map<String, serde_json::Value> = state
        .plugins
        .iter()
        .filter(|(_, record)| record.endpoint_kept(grace))
        .map(|(name, record)| {
            let ids: Vec<&str> = record.devices.iter().map(|d| d.id.as_str()).collect();
            (name.clone(), serde_json::json!(ids))
        })
        .collect();
    let entries: Vec<serde_json::Value> = state
        .pods
        .iter()
        .map(|(name, pod)| {
            serde_json::json!({
                "PodUID": format!("{name}-uid"),
                "ContainerName": pod.container,
                "ResourceName": pod.resource,
                "DeviceIDs": {"-1": pod.devices},
                "AllocResp": "",
            })
        })
        .collect();
    serde_json::json!({
        "Data": {"PodDeviceEntries": entries, "RegisteredDevices": registered},
        "Checksum": 0,
    })
}

/// Replaces the file atomically (a failure is only logged: the folder may
/// be gone at the end of a test).
fn write(path: &PathBuf, state: &SimState) {
    let mut temporary = path.clone().into_os_string();
    temporary.push(".tmp");
    let bytes = serde_json::to_vec(&content(state)).unwrap_or_default();
    let written =
        std::fs::write(&temporary, bytes).and_then(|()| std::fs::rename(&temporary, path));
    if let Err(error) = written {
        tracing::debug!(path = %path.display(), %error, "cannot write the kubelet checkpoint");
    }
}
