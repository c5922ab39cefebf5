//! [`ConfigError`]: every way a configuration directory can be refused,
//! each naming the file (and, where it applies, the field).

use std::path::{Path, PathBuf};

/// A configuration error, always naming the file it came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The directory cannot be listed.
    #[error("config directory {dir}: {source}")]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A config file cannot be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An entry named like a config file that is not a regular file (after
    /// following symlinks): a FIFO, a device, a directory, a socket.
    #[error("{file}: {kind}, not a regular file; remove it or move it out of the config directory")]
    NotAFile {
        /// The entry.
        file: PathBuf,
        /// What it is instead, e.g. `a FIFO`.
        kind: &'static str,
    },
    /// A config file above [`crate::limits::MAX_CONFIG_FILE_BYTES`].
    #[error("{file}: larger than {limit} bytes, the most a config file may have")]
    TooLarge {
        /// The file.
        file: PathBuf,
        /// The cap in bytes.
        limit: u64,
    },
    /// TOML syntax errors, unknown keys and wrong types. `detail` holds the
    /// parser's message with line, column and the offending key.
    #[error("{file}: {detail}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// The parser's message.
        detail: String,
    },
    /// A value breaks a rule; names the file and field.
    #[error("{file}: field `{field}`: {problem}")]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The field, e.g. `nodes[0].replicas`.
        field: String,
        /// What is wrong.
        problem: String,
    },
    /// Two files declare the same resource.
    #[error("{file} and {other}: both declare resource `{resource}`")]
    DuplicateResource {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The resource name.
        resource: String,
    },
    /// Two resources name the same DRA driver.
    #[error("{file} and {other}: both serve DRA driver `{driver}`")]
    DuplicateDriver {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The driver name.
        driver: String,
    },
    /// Two resources would serve the same socket.
    #[error("{file} and {other}: both use socket `{socket}`")]
    DuplicateSocket {
        /// One file.
        file: PathBuf,
        /// The other file.
        other: PathBuf,
        /// The socket name.
        socket: String,
    },
    /// A configuration set was asked for that the directory does not hold.
    #[error("{dir}: no configuration set `{set}` (sets: {available})")]
    UnknownSet {
        /// The config directory.
        dir: PathBuf,
        /// The set asked for.
        set: String,
        /// The sets the directory holds, comma-separated (`default` first).
        available: String,
    },
    /// A folder under `sets/` whose name cannot be a node label's value.
    #[error("{dir}: configuration set name `{set}`: {problem}")]
    SetName {
        /// The folder.
        dir: PathBuf,
        /// Its name.
        set: String,
        /// Why it cannot be a set's name.
        problem: String,
    },
    /// A `host.toml` inside a set: host settings are the node's, shared by
    /// every set.
    #[error(
        "{file}: host settings are shared by every configuration set; put host.toml at the top of the config directory"
    )]
    HostFileInSet {
        /// The file.
        file: PathBuf,
    },
}

impl ConfigError {
    /// A value of `field` in `file` breaks a rule: `problem` says which.
    pub(crate) fn invalid(file: &Path, field: &str, problem: impl Into<String>) -> Self {
        ConfigError::Invalid {
            file: file.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }
}
