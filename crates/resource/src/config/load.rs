//! Reading the configuration directory: which entries are config files,
//! reading each one safely (regular files only, bounded, never blocking),
//! and assembling the resources into a [`ConfigSet`] with cross-file
//! checks (one file per resource name and per socket).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::model::{ConfigSet, ResourceConfig};
use super::schema::HOST_FILE;
use super::schema::{HostSettings, parse};
use super::validate::{check_version, parse_resource};
use wdp_policy::{RegularFileError, read_regular_file};

use crate::limits::MAX_CONFIG_FILE_BYTES;

/// Reads and validates a whole configuration directory.
///
/// Never blocks on what it finds there: an entry named `*.toml` that is
/// not a regular file (after following symlinks, as ConfigMap volumes use
/// them) is refused by name, as is a file above
/// [`MAX_CONFIG_FILE_BYTES`].
pub fn load_dir(dir: &Path) -> Result<ConfigSet, ConfigError> {
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
        // Hidden entries include the `..data` machinery of ConfigMap volumes.
        if name.starts_with('.') || !name.ends_with(".toml") {
            continue;
        }
        files.push(entry.path());
    }
    files.sort();

    let host_path = dir.join(HOST_FILE);
    let host = if files.contains(&host_path) {
        let text = read_config_file(&host_path)?;
        let host: HostSettings = parse(&host_path, &text)?;
        check_version(&host_path, host.version)?;
        host
    } else {
        HostSettings::default()
    };

    let mut resources: BTreeMap<String, ResourceConfig> = BTreeMap::new();
    for file in files.iter().filter(|f| **f != host_path) {
        let text = read_config_file(file)?;
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
        host,
        resources,
    })
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
mod tests {
    use std::process::Command;
    use std::time::Duration;

    use super::*;

    const FUSE: &str =
        "version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\n";

    fn mkfifo(path: &Path) {
        let status = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success());
    }

    /// Runs `load_dir` on a thread and fails the test if it does not
    /// answer (a blocking read would hang it forever).
    fn load_dir_bounded(dir: &Path) -> Result<ConfigSet, ConfigError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let dir = dir.to_owned();
        std::thread::spawn(move || {
            let _ = tx.send(load_dir(&dir));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("load_dir blocked on a special file")
    }

    #[test]
    fn a_fifo_named_toml_is_refused_by_name_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("fuse.toml"), FUSE).unwrap();
        mkfifo(&dir.path().join("x.toml"));
        let err = load_dir_bounded(dir.path()).unwrap_err();
        assert!(
            matches!(err, ConfigError::NotAFile { kind: "a FIFO", .. }),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("x.toml"), "{err}");
        assert!(err.contains("FIFO"), "{err}");

        // Also when host.toml is the FIFO, and through a symlink.
        std::fs::remove_file(dir.path().join("x.toml")).unwrap();
        mkfifo(&dir.path().join("pipe"));
        std::os::unix::fs::symlink("pipe", dir.path().join("host.toml")).unwrap();
        let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
        assert!(err.contains("host.toml"), "{err}");
        assert!(err.contains("FIFO"), "{err}");
    }

    #[test]
    fn directories_and_devices_named_toml_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d.toml")).unwrap();
        let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("d.toml") && err.contains("a directory"),
            "{err}"
        );
        std::fs::remove_dir(dir.path().join("d.toml")).unwrap();

        std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero.toml")).unwrap();
        let err = load_dir_bounded(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("zero.toml") && err.contains("a character device"),
            "{err}"
        );
    }

    #[test]
    fn a_huge_config_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        let file = std::fs::File::create(&big).unwrap();
        // Sparse: no disk used, but far above the limit.
        file.set_len(MAX_CONFIG_FILE_BYTES * 1024).unwrap();
        let err = load_dir_bounded(dir.path()).unwrap_err();
        assert!(matches!(err, ConfigError::TooLarge { .. }), "{err:?}");
        assert!(err.to_string().contains("big.toml"), "{err}");
    }

    #[test]
    fn configmap_symlinks_are_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("..data")).unwrap();
        std::fs::write(dir.path().join("..data/fuse.toml"), FUSE).unwrap();
        std::os::unix::fs::symlink("..data/fuse.toml", dir.path().join("fuse.toml")).unwrap();
        let set = load_dir_bounded(dir.path()).unwrap();
        assert!(set.resources.contains_key("example.com/fuse"));
    }
}
