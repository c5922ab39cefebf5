//! Directory-relative file access (`openat`, `readlinkat`, `fstatat`).
//!
//! Discovery reads a dozen small files per PCI function; resolving each
//! one's full path (root prefix, `/sys/devices/pci…/…`, a symlink) again for
//! every file costs more than the read itself. These helpers read relative
//! to an open directory instead.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use crate::sysfs::DISCOVERY_READ_CAP;

/// Opens a directory.
pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Opens directory `name` relative to `dir` (following symlinks).
pub(crate) fn open_dir_at(dir: impl AsFd, name: &str) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Reads small text file `name` relative to `dir`: one read of a page is the
/// whole file when it comes back short (as sysfs attributes do); at most
/// [`DISCOVERY_READ_CAP`] bytes; lossy UTF-8.
pub(crate) fn read_at(dir: impl AsFd, name: &str) -> io::Result<String> {
    let fd = rustix::fs::openat(dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())?;
    let mut page = [0u8; 4096];
    let mut n = loop {
        match rustix::io::read(&fd, &mut page) {
            Ok(n) => break n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    if n < page.len() {
        return Ok(String::from_utf8_lossy(&page[..n]).into_owned());
    }
    let mut buf = page.to_vec();
    while (buf.len() as u64) < DISCOVERY_READ_CAP {
        n = match rustix::io::read(&fd, &mut page) {
            Ok(0) => break,
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        buf.extend_from_slice(&page[..n]);
    }
    buf.truncate(DISCOVERY_READ_CAP as usize);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Reads and trims small text file `name` relative to `dir`.
pub(crate) fn read_trimmed_at(dir: impl AsFd, name: &str) -> io::Result<String> {
    read_at(dir, name).map(|s| s.trim().to_string())
}

/// Target of symlink `name` relative to `dir`.
pub(crate) fn read_link_at(dir: impl AsFd, name: &str) -> io::Result<PathBuf> {
    let target = rustix::fs::readlinkat(dir, name, Vec::new())?;
    Ok(PathBuf::from(OsString::from_vec(target.into_bytes())))
}

/// True when `name` relative to `dir` exists, following symlinks.
pub(crate) fn exists_at(dir: impl AsFd, name: &str) -> bool {
    rustix::fs::statat(dir, name, AtFlags::empty()).is_ok()
}

/// The status of `name` relative to `dir`, not following a symlink.
pub(crate) fn lstat_at(dir: impl AsFd, name: &str) -> io::Result<rustix::fs::Stat> {
    Ok(rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?)
}

/// Entries of an open directory (read from its current offset), with the
/// type the listing gives, without `.`/`..` and names that are not UTF-8;
/// unsorted. `big` uses a larger buffer, for directories like `/dev`.
pub(crate) fn entries(dir: impl AsFd, big: bool) -> io::Result<Vec<(String, FileType)>> {
    let mut buf = Vec::with_capacity(if big { 64 * 1024 } else { 8 * 1024 });
    let mut raw = RawDir::new(dir, buf.spare_capacity_mut());
    let mut out = Vec::new();
    while let Some(entry) = raw.next() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if let Ok(name) = std::str::from_utf8(name) {
            out.push((name.to_string(), entry.file_type()));
        }
    }
    Ok(out)
}

/// Entry names of an open directory, sorted, without `.`/`..`.
pub(crate) fn names_of(dir: impl AsFd) -> io::Result<Vec<String>> {
    let mut names: Vec<String> = entries(dir, false)?.into_iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    Ok(names)
}

/// Entry names of directory `name` relative to `dir`, sorted; empty when it
/// cannot be listed.
pub(crate) fn names_at(dir: impl AsFd, name: &str) -> Vec<String> {
    open_dir_at(dir, name)
        .and_then(names_of)
        .unwrap_or_default()
}
