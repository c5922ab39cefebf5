//! The one error type of the host crate: everything that stops a
//! configuration from being loaded, checked or served, the errors of the
//! crates below included. Each variant names the file, field, guest or
//! directory at fault and keeps its cause as the error source.

use std::path::PathBuf;

use wdp_config::ConfigError;
use wdp_dra_driver::DraError;
use wdp_resource::ResourceError;

/// Anything that stops a configuration from being applied or served.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A config file or the directory is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A resource cannot be put in service (a guest, its hardware, its
    /// discovery or health, the Wasm engine).
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// A resource's registration socket path cannot be bound.
    #[error("{}: socket: {} is {len} bytes; a Unix socket path may have at most {max}", file.display(), path.display())]
    SocketPath {
        /// The resource file.
        file: PathBuf,
        /// The full socket path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// The most the kernel accepts.
        max: usize,
    },
    /// A background task of the host died (a bug: it panicked).
    #[error("internal task failed: {0}")]
    Task(#[source] tokio::task::JoinError),
    /// The device-plugin folder is unusable.
    #[error("device-plugin directory {}: {source}", dir.display())]
    PluginDir {
        /// The folder.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `record` could not read what a resource selects, or copy it.
    #[error("{what}")]
    Record {
        /// What was being done, naming the resource (and its file).
        what: String,
        /// The hardware error.
        #[source]
        source: wdp_hardware::HardwareError,
    },
    /// The CDI folder cannot take the specs of resources with `cdi` on.
    #[error("CDI directory {} (--cdi-dir): {source}", dir.display())]
    CdiDir {
        /// The folder.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A DRA resource cannot be served (no API client, a device with no
    /// DRA name).
    #[error(transparent)]
    Dra(#[from] DraError),
    /// A DRA resource is configured but this node's name is unknown.
    #[error("{}: DRA: a DRA resource needs this node's name (--node-name or NODE_NAME) to publish its ResourceSlices", file.display())]
    NoNodeName {
        /// The first DRA resource file.
        file: PathBuf,
    },
    /// A folder cannot be watched for changes.
    #[error("cannot watch {}: {source}", dir.display())]
    Watch {
        /// The folder.
        dir: PathBuf,
        /// The watcher's error.
        #[source]
        source: wdp_fs_watch::Error,
    },
}
