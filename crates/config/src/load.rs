//! Reading the configuration directory: which entries are config files,
//! reading each one safely (regular files only, bounded, never blocking),
//! and assembling the resources into a [`ConfigSet`] with cross-file
//! checks (one file per resource name and per socket).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::ConfigError;
use super::model::{ConfigSet, ResourceConfig};
use super::schema::HOST_FILE;
use super::schema::{HostSettings, parse};
use super::sets::{describe_available, scan_sets, set_dir};
use super::validate::{check_version, parse_resource};
use wdp_regular_file::{RegularFileError, read_regular_file};

use crate::limits::MAX_CONFIG_FILE_BYTES;

/// Reads and validates a whole configuration directory: its default set.
///
/// Never blocks on what it finds there: an entry named `*.toml` that is
/// not a regular file (after following symlinks, as ConfigMap volumes use
/// them) is refused by name, as is a file above
/// [`MAX_CONFIG_FILE_BYTES`].
pub fn load_dir(dir: &Path) -> Result<ConfigSet, ConfigError> {
    load_set(dir, None)
}

/// Reads and validates configuration set `set` of `dir` (`None`: the
/// default set, the resource files at the top), as [`load_dir`] does:
/// its resource files, with `host.toml` and the guests' paths taken from
/// the top of `dir` (see [`super::sets`]). Only this set's files are
/// read: a mistake in another set (a folder whose name cannot name a set
/// included) does not refuse it.
pub fn load_set(dir: &Path, set: Option<&str>) -> Result<ConfigSet, ConfigError> {
    let files_dir = match set {
        None => dir.to_owned(),
        Some(name) => {
            let found = scan_sets(dir)?;
            if let Some(refused) = found.refusal(name) {
                return Err(refused);
            }
            if !found.sets.iter().any(|known| known == name) {
                return Err(ConfigError::UnknownSet {
                    dir: dir.to_owned(),
                    set: name.to_owned(),
                    available: describe_available(dir),
                });
            }
            set_dir(dir, name)
        }
    };
    let mut files = toml_files(&files_dir)?;
    if set.is_some() {
        if let Some(file) = files.iter().find(|f| f.ends_with(HOST_FILE)) {
            return Err(ConfigError::HostFileInSet { file: file.clone() });
        }
        let top = dir.join(HOST_FILE);
        if toml_files(dir)?.contains(&top) {
            files.insert(0, top);
        }
    }
    let mut digest = Sha256::new();
    let host_path = dir.join(HOST_FILE);
    let host = if files.contains(&host_path) {
        let text = read_config_file(&host_path)?;
        digest_file(&mut digest, HOST_FILE, &text);
        parse_host(&host_path, &text)?
    } else {
        HostSettings::default()
    };

    let mut resources: BTreeMap<String, ResourceConfig> = BTreeMap::new();
    for file in files.iter().filter(|f| **f != host_path) {
        let text = read_config_file(file)?;
        let name = file.strip_prefix(dir).unwrap_or(file);
        digest_file(&mut digest, &name.to_string_lossy(), &text);
        let resource = parse_resource(dir, file, &text, &host)?;
        if let Some(other) = resources.get(&resource.resource) {
            return Err(ConfigError::DuplicateResource {
                file: file.clone(),
                other: other.file.clone(),
                resource: resource.resource,
            });
        }
        if let Some(driver) = &resource.driver
            && let Some(other) = resources
                .values()
                .find(|r| r.driver.as_ref() == Some(driver))
        {
            return Err(ConfigError::DuplicateDriver {
                file: resource.file.clone(),
                other: other.file.clone(),
                driver: driver.clone(),
            });
        }
        if resource.driver.is_none()
            && let Some(other) = resources
                .values()
                .find(|r| r.driver.is_none() && r.socket == resource.socket)
        {
            return Err(ConfigError::DuplicateSocket {
                file: file.clone(),
                other: other.file.clone(),
                socket: resource.socket,
            });
        }
        resources.insert(resource.resource.clone(), resource);
    }
    Ok(ConfigSet {
        dir: dir.to_owned(),
        set: set.map(str::to_owned),
        digest: format!("sha256:{:x}", digest.finalize()),
        host,
        resources,
    })
}

/// Reads only the host settings of configuration directory `dir`: its
/// `host.toml`, checked as [`load_dir`] checks it, or the defaults when
/// there is none. For a caller that needs a host setting before the
/// resource files are read (and validated by [`load_dir`]).
pub fn load_host_settings(dir: &Path) -> Result<HostSettings, ConfigError> {
    let path = dir.join(HOST_FILE);
    match std::fs::symlink_metadata(&path) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(HostSettings::default()),
        _ => parse_host(&path, &read_config_file(&path)?),
    }
}

/// `host.toml` (at `path`, holding `text`) parsed and checked.
fn parse_host(path: &Path, text: &str) -> Result<HostSettings, ConfigError> {
    let host: HostSettings = parse(path, text)?;
    check_version(path, host.version)?;
    // The state label is `<node-label>.state`: both must be label names.
    let label = &host.config_sets.node_label;
    if let Some(problem) = wdp_k8s_naming::label_name_problem(&format!("{label}.state")) {
        return Err(ConfigError::invalid(
            path,
            "config-sets.node-label",
            format!("{label:?} (and {label}.state) must be a node label's name: {problem}"),
        ));
    }
    Ok(host)
}

/// The `*.toml` entries of `dir`, sorted; hidden entries (the `..data`
/// machinery of ConfigMap volumes) skipped.
fn toml_files(dir: &Path) -> Result<Vec<PathBuf>, ConfigError> {
    let entries = std::fs::read_dir(dir).map_err(|source| ConfigError::Directory {
        dir: dir.to_owned(),
        source,
    })?;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| ConfigError::Directory {
            dir: dir.to_owned(),
            source,
        })?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || !name.ends_with(".toml") {
            continue;
        }
        files.push(entry.path());
    }
    files.sort();
    Ok(files)
}

/// Adds one config file (its path and text) to a set's digest.
fn digest_file(digest: &mut Sha256, name: &str, text: &str) {
    for part in [name.as_bytes(), text.as_bytes()] {
        digest.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        digest.update(part);
    }
}

/// Reads one config file as UTF-8 text: only a regular file (symlinks
/// followed), at most [`MAX_CONFIG_FILE_BYTES`], opened without blocking
/// so a FIFO or a device cannot hang the caller.
pub fn read_config_file(file: &Path) -> Result<String, ConfigError> {
    let read_error = |source| ConfigError::Read {
        file: file.to_owned(),
        source,
    };
    let bytes = read_regular_file(file, MAX_CONFIG_FILE_BYTES).map_err(|e| match e {
        RegularFileError::Io(source) => read_error(source),
        RegularFileError::NotAFile { kind } => ConfigError::NotAFile {
            file: file.to_owned(),
            kind,
        },
        RegularFileError::TooLarge { limit } => ConfigError::TooLarge {
            file: file.to_owned(),
            limit,
        },
    })?;
    String::from_utf8(bytes).map_err(|e| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text ({e})"),
        ))
    })
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
