//! Reading the folders to package: every regular file beneath each, in
//! sorted order, under `guests/` or `config/` in the image. A symlink is
//! followed only when it stays inside its folder; FIFOs, devices and
//! sockets are refused by name, never opened.

use std::fs::Metadata;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::digest::sha256;
use crate::error::PackageError;

/// Where an installer binary lives in the image (its entrypoint).
pub const INSTALLER_PATH: &str = "usr/local/bin/wasm-device-plugin";

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
    /// Whether it is executable (the installer).
    pub executable: bool,
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

/// The installer binary at `path`, as [`INSTALLER_PATH`]: a regular
/// file that is a statically linked ELF executable (a scratch image holds
/// no dynamic loader or libc for any other).
pub fn read_installer(path: &Path) -> Result<PackagedFile, PackageError> {
    let meta = std::fs::metadata(path).map_err(read(path))?;
    if !meta.is_file() {
        return Err(PackageError::NotAFile {
            path: path.to_owned(),
            kind: special_kind(&meta),
        });
    }
    let bytes = std::fs::read(path).map_err(read(path))?;
    if !is_static_elf(&bytes) {
        return Err(PackageError::NotStatic {
            path: path.to_owned(),
        });
    }
    Ok(PackagedFile {
        path: INSTALLER_PATH.to_owned(),
        digest: sha256(&bytes),
        bytes,
        executable: true,
    })
}

/// Whether `bytes` are an ELF executable with no program interpreter
/// (`PT_INTERP`), i.e. one that runs without a dynamic loader.
fn is_static_elf(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return false; // Not a 64-bit little-endian ELF file.
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    };
    let Some(table) = u64_at(0x20) else {
        return false;
    };
    let entry_size = usize::from(u16_at(0x36));
    let entries = usize::from(u16_at(0x38));
    (0..entries).all(|i| {
        let at = usize::try_from(table)
            .unwrap_or(usize::MAX)
            .saturating_add(i * entry_size);
        u32_at(at).is_some_and(|kind| kind != PT_INTERP)
    })
}

fn read(path: &Path) -> impl FnOnce(std::io::Error) -> PackageError + '_ {
    move |source| PackageError::Read {
        path: path.to_owned(),
        source,
    }
}

fn collect_folder(
    folder: &Path,
    prefix: &str,
    files: &mut Vec<PackagedFile>,
) -> Result<(), PackageError> {
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
                    executable: false,
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
