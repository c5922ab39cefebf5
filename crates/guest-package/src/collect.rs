//! Reading the folders to package: every regular file beneath each, in
//! sorted order, under `guests/` or `config/` in the image. A symlink is
//! followed only when it stays inside its folder; FIFOs, devices and
//! sockets are refused by name, never opened.

use std::fs::Metadata;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::digest::sha256;
use crate::error::PackageError;

/// One file of the layer.
#[derive(Clone, PartialEq, Eq)]
pub struct PackagedFile {
    /// Its path in the image, e.g. `guests/numa_packing.wasm`.
    pub path: String,
    /// Its content.
    pub bytes: Vec<u8>,
    /// Its digest, `sha256:…` (for a guest: what a `sha256` pin names,
    /// without the prefix).
    pub digest: String,
}

impl std::fmt::Debug for PackagedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackagedFile")
            .field("path", &self.path)
            .field("bytes", &self.bytes.len())
            .field("digest", &self.digest)
            .finish()
    }
}

impl PackagedFile {
    /// Whether it is a guest component (a `.wasm` file under `guests/`).
    pub fn is_guest(&self) -> bool {
        self.path.starts_with("guests/") && self.path.ends_with(".wasm")
    }
}

/// Every file of `guests` (as `guests/…`) and of `config` (as
/// `config/…`), sorted by image path. Refuses a guests folder without a
/// `.wasm` file.
pub fn collect_inputs(
    guests: &Path,
    config: Option<&Path>,
) -> Result<Vec<PackagedFile>, PackageError> {
    let mut files = Vec::new();
    collect_folder(guests, "guests", &mut files)?;
    if !files.iter().any(PackagedFile::is_guest) {
        return Err(PackageError::NoGuests {
            folder: guests.to_owned(),
        });
    }
    if let Some(config) = config {
        collect_folder(config, "config", &mut files)?;
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn collect_folder(
    folder: &Path,
    prefix: &str,
    files: &mut Vec<PackagedFile>,
) -> Result<(), PackageError> {
    fn read(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
        move |source| PackageError::Read {
            path: path.to_owned(),
            source,
        }
    }
    let root = folder.canonicalize().map_err(read(folder))?;
    if !root.is_dir() {
        return Err(PackageError::NotAFile {
            path: folder.to_owned(),
            kind: "a file where a folder was expected",
        });
    }
    let mut pending: Vec<(PathBuf, String)> = vec![(folder.to_owned(), prefix.to_owned())];
    while let Some((dir, image_dir)) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(read(&dir))?;
        for entry in entries {
            let entry = entry.map_err(read(&dir))?;
            let path = entry.path();
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| PackageError::BadName { path: path.clone() })?;
            let image_path = format!("{image_dir}/{name}");
            let link = std::fs::symlink_metadata(&path).map_err(read(&path))?;
            if link.file_type().is_symlink() {
                let target = path.canonicalize().map_err(read(&path))?;
                if !target.starts_with(&root) {
                    return Err(PackageError::SymlinkOut {
                        path,
                        target,
                        folder: folder.to_owned(),
                    });
                }
            }
            let meta = std::fs::metadata(&path).map_err(read(&path))?;
            if meta.is_dir() {
                pending.push((path, image_path));
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).map_err(read(&path))?;
                files.push(PackagedFile {
                    path: image_path,
                    digest: sha256(&bytes),
                    bytes,
                });
            } else {
                return Err(PackageError::NotAFile {
                    path,
                    kind: special_kind(&meta),
                });
            }
        }
    }
    Ok(())
}

fn special_kind(meta: &Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_char_device() {
        "a character device"
    } else {
        "a special file"
    }
}
