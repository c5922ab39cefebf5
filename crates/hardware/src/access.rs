//! Scoped sysfs attribute access for guests.
//!
//! A guest may read attributes only beneath the sysfs directory of a
//! candidate its resource selected, and write only the attributes its config
//! grants by name. The rules, all checked on every call:
//! - the name is relative and has no `..` component (refused outright, even
//!   when it would stay inside), no NUL, and is at most 4096 bytes;
//! - the candidate's sysfs directory, resolved beneath the host root with
//!   every symlink followed, must lie inside the (canonical) root;
//! - `<that dir>/<name>` is resolved one component at a time, every symlink
//!   followed, and each step must stay beneath that directory (the last one
//!   strictly beneath): a symlink out of the tree (`driver/…`,
//!   `iommu_group/…`, `physfn/…`, anything absolute, a dangling link whose
//!   target would be outside) is refused before anything beyond it is looked
//!   at, so a guest cannot even probe what exists outside;
//! - the file is opened without following a final symlink and without
//!   blocking, and the opened file must be the resolved path (checked through
//!   `/proc/self/fd` where mounted) and a regular file;
//! - reads return at most [`ATTRIBUTE_SIZE_LIMIT`] bytes (larger is an
//!   error) with trailing newlines trimmed; writes must be granted: `name`,
//!   with `.` components and repeated `/` removed, must equal an entry of
//!   `granted` normalised the same way.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use crate::candidate::Candidate;
use crate::root::HostRoot;

/// Largest attribute value read or written, in bytes.
pub const ATTRIBUTE_SIZE_LIMIT: usize = 64 * 1024;

/// Why an attribute access was refused or failed. Every variant names the
/// candidate (its id) and the attribute as the guest wrote it.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The candidate has no sysfs directory (e.g. a node without sysfs entry).
    #[error("device {candidate}: has no sysfs directory, so no attribute {name:?}")]
    NoSysfsDir {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// The name itself is not allowed (absolute, `..`, empty, NUL, too long).
    #[error("device {candidate}: attribute name {name:?} refused: {reason}")]
    BadName {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The name resolves (through symlinks) outside the device's sysfs directory.
    #[error("device {candidate}: attribute {name:?} resolves outside the device's sysfs directory")]
    OutsideDevice {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// A write to an attribute the resource's config does not grant.
    #[error(
        "device {candidate}: writing attribute {name:?} is not granted by the resource's config"
    )]
    NotGranted {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// No such attribute (or the device is gone).
    #[error("device {candidate}: no attribute {name:?}")]
    NotFound {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// The name is a directory or another non-regular file.
    #[error("device {candidate}: attribute {name:?} is not a regular file")]
    NotAFile {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// The value read or to be written is over [`ATTRIBUTE_SIZE_LIMIT`].
    #[error("device {candidate}: attribute {name:?} value is over {ATTRIBUTE_SIZE_LIMIT} bytes")]
    TooLarge {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// The value read is not UTF-8 (use [`read_attribute_bytes`]).
    #[error("device {candidate}: attribute {name:?} is not UTF-8 text")]
    NotText {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
    },
    /// Any other I/O error.
    #[error("device {candidate}: attribute {name:?}: {source}")]
    Io {
        /// Candidate id.
        candidate: String,
        /// Attribute name as given.
        name: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// Checks an attribute name and returns its normal form (`a/b`).
fn normal_name(name: &str) -> Result<String, &'static str> {
    if name.is_empty() {
        return Err("empty");
    }
    if name.len() > 4096 {
        return Err("too long");
    }
    if name.contains('\0') {
        return Err("contains NUL");
    }
    let mut parts = Vec::new();
    for comp in Path::new(name).components() {
        match comp {
            Component::Normal(p) => parts.push(p.to_str().ok_or("not UTF-8")?),
            Component::CurDir => {}
            Component::ParentDir => return Err("`..` is not allowed"),
            Component::RootDir | Component::Prefix(_) => return Err("must be relative"),
        }
    }
    if parts.is_empty() {
        return Err("names the device directory itself");
    }
    Ok(parts.join("/"))
}

/// What a checked access resolved to.
struct Resolved {
    /// Canonical real path of the attribute.
    real: PathBuf,
}

struct Ctx<'a> {
    candidate: &'a str,
    name: &'a str,
}

impl Ctx<'_> {
    fn io(&self, source: io::Error) -> AccessError {
        match source.kind() {
            io::ErrorKind::NotFound => AccessError::NotFound {
                candidate: self.candidate.into(),
                name: self.name.into(),
            },
            _ => AccessError::Io {
                candidate: self.candidate.into(),
                name: self.name.into(),
                source,
            },
        }
    }
    fn outside(&self) -> AccessError {
        AccessError::OutsideDevice {
            candidate: self.candidate.into(),
            name: self.name.into(),
        }
    }
    fn not_a_file(&self) -> AccessError {
        AccessError::NotAFile {
            candidate: self.candidate.into(),
            name: self.name.into(),
        }
    }
    fn too_large(&self) -> AccessError {
        AccessError::TooLarge {
            candidate: self.candidate.into(),
            name: self.name.into(),
        }
    }
}

/// Validates `name` and resolves it beneath the candidate's sysfs directory.
fn resolve(
    root: &HostRoot,
    candidate: &Candidate,
    ctx: &Ctx<'_>,
    normal: &str,
) -> Result<Resolved, AccessError> {
    let Some(dir) = &candidate.sysfs_dir else {
        return Err(AccessError::NoSysfsDir {
            candidate: ctx.candidate.into(),
            name: ctx.name.into(),
        });
    };
    let root_real = std::fs::canonicalize(root.path()).map_err(|e| ctx.io(e))?;
    let base = std::fs::canonicalize(root.resolve(dir)).map_err(|e| ctx.io(e))?;
    if !base.starts_with(&root_real) {
        return Err(ctx.outside());
    }
    // One component at a time, so that a step leading out of the device
    // directory is refused before anything beyond it is looked at (whether
    // something exists outside is none of the guest's business).
    let mut current = base.clone();
    for part in normal.split('/') {
        let next = current.join(part);
        current = match std::fs::canonicalize(&next) {
            Ok(real) if real.starts_with(&base) => real,
            Ok(_) => return Err(ctx.outside()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // A dangling link: outside if its target would be.
                if let Ok(target) = std::fs::read_link(&next) {
                    let lexical = crate::root::normalize_host(&current.join(target));
                    if !lexical.starts_with(&base) {
                        return Err(ctx.outside());
                    }
                }
                return Err(ctx.io(e));
            }
            Err(e) => return Err(ctx.io(e)),
        };
    }
    if current == base {
        return Err(ctx.outside());
    }
    Ok(Resolved { real: current })
}

/// Opens the resolved attribute without following a final symlink and
/// without blocking, then checks it is the file that was resolved and a
/// regular file.
fn open_checked(
    options: &mut OpenOptions,
    r: &Resolved,
    ctx: &Ctx<'_>,
) -> Result<File, AccessError> {
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&r.real)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                ctx.outside()
            } else if e.raw_os_error() == Some(libc::EISDIR) {
                ctx.not_a_file()
            } else {
                ctx.io(e)
            }
        })?;
    if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        && opened != r.real
    {
        return Err(ctx.outside());
    }
    let meta = file.metadata().map_err(|e| ctx.io(e))?;
    if !meta.is_file() {
        return Err(ctx.not_a_file());
    }
    Ok(file)
}

/// Reads attribute `name` (a path relative to the candidate's sysfs
/// directory, e.g. `current_link_speed` or `drm/renderD128/dev`) as bytes.
/// See the module docs for the rules.
///
/// # Errors
/// [`AccessError`] naming the candidate and attribute.
pub fn read_attribute_bytes(
    root: &HostRoot,
    candidate: &Candidate,
    name: &str,
) -> Result<Vec<u8>, AccessError> {
    let ctx = Ctx {
        candidate: &candidate.id,
        name,
    };
    let normal = normal_name(name).map_err(|reason| AccessError::BadName {
        candidate: candidate.id.clone(),
        name: name.into(),
        reason,
    })?;
    let resolved = resolve(root, candidate, &ctx, &normal)?;
    let file = open_checked(OpenOptions::new().read(true), &resolved, &ctx)?;
    let mut buf = Vec::new();
    file.take(ATTRIBUTE_SIZE_LIMIT as u64 + 1)
        .read_to_end(&mut buf)
        .map_err(|e| ctx.io(e))?;
    if buf.len() > ATTRIBUTE_SIZE_LIMIT {
        return Err(ctx.too_large());
    }
    Ok(buf)
}

/// Reads attribute `name` as text, trailing newlines trimmed. See the module
/// docs for the rules.
///
/// # Errors
/// [`AccessError`] naming the candidate and attribute; [`AccessError::NotText`]
/// for a binary attribute (use [`read_attribute_bytes`]).
pub fn read_attribute(
    root: &HostRoot,
    candidate: &Candidate,
    name: &str,
) -> Result<String, AccessError> {
    let bytes = read_attribute_bytes(root, candidate, name)?;
    let mut text = String::from_utf8(bytes).map_err(|_| AccessError::NotText {
        candidate: candidate.id.clone(),
        name: name.into(),
    })?;
    let trimmed = text.trim_end_matches('\n').len();
    text.truncate(trimmed);
    Ok(text)
}

/// Writes `value` to attribute `name`, which must be granted by name (see
/// the module docs). The value is written whole, in one `write`, as sysfs
/// expects; nothing is created.
///
/// # Errors
/// [`AccessError::NotGranted`] for a name not in `granted` (checked before
/// anything is touched); otherwise as [`read_attribute`].
pub fn write_attribute(
    root: &HostRoot,
    candidate: &Candidate,
    name: &str,
    value: &str,
    granted: &[String],
) -> Result<(), AccessError> {
    let ctx = Ctx {
        candidate: &candidate.id,
        name,
    };
    let normal = normal_name(name).map_err(|reason| AccessError::BadName {
        candidate: candidate.id.clone(),
        name: name.into(),
        reason,
    })?;
    if !granted
        .iter()
        .any(|g| normal_name(g).is_ok_and(|g| g == normal))
    {
        return Err(AccessError::NotGranted {
            candidate: candidate.id.clone(),
            name: name.into(),
        });
    }
    if value.len() > ATTRIBUTE_SIZE_LIMIT {
        return Err(ctx.too_large());
    }
    let resolved = resolve(root, candidate, &ctx, &normal)?;
    let meta = std::fs::symlink_metadata(&resolved.real).map_err(|e| ctx.io(e))?;
    if !meta.is_file() {
        return Err(ctx.not_a_file());
    }
    // Noted before the write, so the watcher already knows its echo.
    crate::watch::note_own_write(&resolved.real);
    let mut file = open_checked(
        OpenOptions::new().write(true).truncate(true),
        &resolved,
        &ctx,
    )?;
    let written = file.write(value.as_bytes()).map_err(|e| ctx.io(e))?;
    if written != value.len() {
        return Err(ctx.io(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short write: {written} of {} bytes", value.len()),
        )));
    }
    Ok(())
}

/// Names in directory `name` (`""` or `"."` for the device directory itself)
/// beneath the candidate's sysfs directory, sorted; the same confinement as
/// [`read_attribute`] applies.
///
/// # Errors
/// [`AccessError`] naming the candidate and directory.
pub fn list_attributes(
    root: &HostRoot,
    candidate: &Candidate,
    name: &str,
) -> Result<Vec<String>, AccessError> {
    let ctx = Ctx {
        candidate: &candidate.id,
        name,
    };
    let whole_dir = name.is_empty() || Path::new(name).components().all(|c| c == Component::CurDir);
    let dir = if whole_dir {
        None
    } else {
        Some(normal_name(name).map_err(|reason| AccessError::BadName {
            candidate: candidate.id.clone(),
            name: name.into(),
            reason,
        })?)
    };
    let real = match &dir {
        Some(normal) => resolve(root, candidate, &ctx, normal)?.real,
        None => {
            let Some(sysfs) = &candidate.sysfs_dir else {
                return Err(AccessError::NoSysfsDir {
                    candidate: candidate.id.clone(),
                    name: name.into(),
                });
            };
            let root_real = std::fs::canonicalize(root.path()).map_err(|e| ctx.io(e))?;
            let base = std::fs::canonicalize(root.resolve(sysfs)).map_err(|e| ctx.io(e))?;
            if !base.starts_with(&root_real) {
                return Err(ctx.outside());
            }
            base
        }
    };
    let entries = std::fs::read_dir(&real).map_err(|e| ctx.io(e))?;
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort_unstable();
    Ok(names)
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
