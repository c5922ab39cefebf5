//! [`PackageError`]: every input refused and every write that failed,
//! each naming the path.

use std::path::PathBuf;

/// Why a package was not written.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// An input folder or file cannot be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The folder or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An input entry that is neither a regular file nor a folder.
    #[error("{path}: {kind}, not a regular file; a package holds regular files only")]
    NotAFile {
        /// The entry.
        path: PathBuf,
        /// What it is instead, e.g. `a FIFO`.
        kind: &'static str,
    },
    /// A symlink whose target lies outside the folder being packaged.
    #[error(
        "{path}: a symlink to {target}, outside {folder}; a package holds only what its folders hold"
    )]
    SymlinkOut {
        /// The symlink.
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
        /// The folder being packaged.
        folder: PathBuf,
    },
    /// The guests folder holds no `.wasm` file.
    #[error("{folder}: no .wasm guest in it; point the guests folder at the built components")]
    NoGuests {
        /// The guests folder.
        folder: PathBuf,
    },
    /// An installer that is not a statically linked executable.
    #[error(
        "{path}: not a statically linked ELF executable; the image has no loader or libc, so ship the static (musl) build"
    )]
    NotStatic {
        /// The file.
        path: PathBuf,
    },
    /// A name the layer cannot hold (not UTF-8).
    #[error("{path}: the name is not UTF-8, which an image layer's paths must be")]
    BadName {
        /// The entry.
        path: PathBuf,
    },
    /// The archive cannot be written.
    #[error("{path}: cannot write the package: {source}")]
    Output {
        /// The archive being written.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
