//! The record, in the state folder, of a resource moving between the
//! kubelet APIs: written when a switch starts, removed when its handover
//! finished, so that a host restarting in between resumes the handover
//! (withholds what the other API handed out) instead of offering
//! everything at once.
//!
//! One JSON file per resource, `<state>/api-switch/<resource>.json` (the
//! `/` of the resource name made `_`), written atomically and synced.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use wdp_cdi::atomic_file::{self, Durability};

/// What a restarting host needs to resume a handover.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SwitchRecord {
    /// The kubelet resource name (`example.com/gpu`).
    pub(crate) resource: String,
    /// The DRA driver name of the DRA side.
    pub(crate) driver: String,
    /// The device-plugin socket's file name of the device-plugin side.
    pub(crate) socket: String,
}

/// Where the records live.
fn folder(state_dir: &Path) -> PathBuf {
    state_dir.join("api-switch")
}

/// The record file of `resource`.
pub(crate) fn path(state_dir: &Path, resource: &str) -> PathBuf {
    folder(state_dir).join(format!("{}.json", resource.replace('/', "_")))
}

impl SwitchRecord {
    /// Writes the record (replacing any of the same resource).
    pub(crate) fn write(&self, state_dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(folder(state_dir))?;
        let bytes = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        atomic_file::replace(&path(state_dir, &self.resource), &bytes, Durability::Synced)
    }

    /// The record of `resource`, if a handover of it was under way; an
    /// unreadable record is logged and treated as one (the caller then
    /// withholds what it cannot rule out).
    pub(crate) fn read(state_dir: &Path, resource: &str) -> Option<Result<Self, String>> {
        let path = path(state_dir, resource);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return None,
            Err(error) => return Some(Err(format!("{}: {error}", path.display()))),
        };
        Some(
            serde_json::from_slice::<Self>(&bytes)
                .map_err(|error| format!("{}: {error}", path.display()))
                .and_then(|record| match record.resource == resource {
                    true => Ok(record),
                    false => Err(format!(
                        "{}: names resource {:?}, not {resource:?}",
                        path.display(),
                        record.resource
                    )),
                }),
        )
    }

    /// Removes the record of `resource` (the handover finished).
    pub(crate) fn remove(state_dir: &Path, resource: &str) {
        let path = path(state_dir, resource);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "cannot remove the API switch record");
            }
        }
    }
}

#[cfg(test)]
#[path = "switch_record_tests.rs"]
mod tests;
