//! `install-guests`: the guests folder of a mounted image copied into a
//! folder the host reads, for clusters without image volumes (an init
//! container runs the image's installer into an `emptyDir`). Each file is
//! written under a temporary name, synced and renamed, so the host never
//! sees half a guest; the same checks as packaging apply to the source.

use std::io::Write;
use std::path::Path;

use crate::collect::{PackagedFile, collect_inputs};
use crate::error::PackageError;

/// Copies every file of `from` into `to` (created if missing), keeping
/// subfolders; returns the files copied, with their digests.
pub fn install_guests(from: &Path, to: &Path) -> Result<Vec<PackagedFile>, PackageError> {
    let files = collect_inputs(from, None)?;
    for file in &files {
        let relative = file.path.strip_prefix("guests/").unwrap_or(&file.path);
        let target = to.join(relative);
        let io = |source| PackageError::Output {
            path: target.clone(),
            source,
        };
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut partial_name = target.file_name().unwrap_or_default().to_owned();
        partial_name.push(".partial");
        let partial = target.with_file_name(partial_name);
        let written = std::fs::File::create(&partial)
            .and_then(|mut out| {
                out.write_all(&file.bytes)?;
                out.sync_all()
            })
            .and_then(|()| std::fs::rename(&partial, &target));
        if let Err(source) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(io(source));
        }
    }
    Ok(files)
}
