//! Reading a file that should be a regular file but may not be: a FIFO
//! would block forever, `/dev/zero` never ends, a directory is no content.
//! Guests and their signatures are read this way (`wdp-policy`), and the
//! host's configuration files (`wdp-config`) with the same function. It
//! reads and judges nothing else.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file could not be read as a regular file of bounded size.
#[derive(Debug, thiserror::Error)]
pub enum RegularFileError {
    /// It could not be examined, opened or read.
    #[error("{}", io_words(.0))]
    Io(#[from] std::io::Error),
    /// It is something else: a FIFO, a device, a directory, a socket.
    #[error("{kind}, not a regular file")]
    NotAFile {
        /// What it is, in words (`a FIFO`).
        kind: &'static str,
    },
    /// It holds more than the cap.
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The cap in bytes.
        limit: u64,
    },
}

/// An I/O error in words, without the OS's error number: `it does not
/// exist` for a missing file (the path is named by the message around it),
/// else the OS's words (`Permission denied`).
pub fn io_words(error: &std::io::Error) -> String {
    if error.kind() == std::io::ErrorKind::NotFound {
        return "it does not exist".to_owned();
    }
    let text = error.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_owned(),
        _ => text,
    }
}

/// Reads `path` (symlinks followed) when it is a regular file of at most
/// `limit` bytes. The type is checked before opening (opening some devices
/// has effects), the file is opened without blocking and checked again
/// (the entry may have changed in between), and at most `limit + 1` bytes
/// are read.
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, RegularFileError> {
    check(&std::fs::metadata(path)?, limit)?;
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    check(&file.metadata()?, limit)?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(RegularFileError::TooLarge { limit });
    }
    Ok(bytes)
}

fn check(meta: &Metadata, limit: u64) -> Result<(), RegularFileError> {
    let kind = meta.file_type();
    if kind.is_file() {
        return if meta.len() > limit {
            Err(RegularFileError::TooLarge { limit })
        } else {
            Ok(())
        };
    }
    Err(RegularFileError::NotAFile {
        kind: if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        },
    })
}
