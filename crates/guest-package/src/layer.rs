//! The image's one layer: a tar of the packaged files with every field
//! that could differ between machines fixed (owner 0:0, no user or group
//! names, mode 0755 for folders and the installer, 0644 for every other
//! file, one timestamp), then
//! gzip with no name and no time in its header.

use std::collections::BTreeSet;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::collect::PackagedFile;
use crate::digest::sha256;
use crate::error::PackageError;

/// A built layer.
#[derive(Clone, Debug)]
pub struct Layer {
    /// The gzip-compressed tar: the blob the manifest names.
    pub compressed: Vec<u8>,
    /// Digest of the compressed blob.
    pub digest: String,
    /// Digest of the uncompressed tar (the image config's `diff_id`).
    pub diff_id: String,
}

/// Lays `files` (sorted by path) out as a layer stamped with `epoch`.
pub fn build(files: &[PackagedFile], epoch: u64) -> Result<Layer, PackageError> {
    let tar_error = |source| PackageError::Output {
        path: "<layer>".into(),
        source,
    };
    let mut tar = tar::Builder::new(Vec::new());
    tar.mode(tar::HeaderMode::Deterministic);
    let mut folders_written = BTreeSet::new();
    for file in files {
        // Every parent folder once, before its first file.
        let mut parent = String::new();
        for part in file.path.split('/').take(file.path.split('/').count() - 1) {
            parent.push_str(part);
            parent.push('/');
            if folders_written.insert(parent.clone()) {
                let mut header = header(tar::EntryType::Directory, 0o755, 0, epoch);
                tar.append_data(&mut header, &parent, std::io::empty())
                    .map_err(tar_error)?;
            }
        }
        let mode = if file.executable { 0o755 } else { 0o644 };
        let mut header = header(
            tar::EntryType::Regular,
            mode,
            file.bytes.len() as u64,
            epoch,
        );
        tar.append_data(&mut header, &file.path, file.bytes.as_slice())
            .map_err(tar_error)?;
    }
    let uncompressed = tar.into_inner().map_err(tar_error)?;
    let mut gzip = GzEncoder::new(Vec::new(), Compression::best());
    gzip.write_all(&uncompressed).map_err(tar_error)?;
    let compressed = gzip.finish().map_err(tar_error)?;
    Ok(Layer {
        digest: sha256(&compressed),
        diff_id: sha256(&uncompressed),
        compressed,
    })
}

/// A GNU tar header with every machine-dependent field fixed.
pub(crate) fn header(kind: tar::EntryType, mode: u32, size: u64, epoch: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(epoch);
    header.set_uid(0);
    header.set_gid(0);
    header
}
