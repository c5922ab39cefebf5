//! The one error type of the host crate: everything that stops a
//! configuration from being loaded, checked or served. Each variant names
//! the file, field, guest or directory at fault and keeps its cause as the
//! error source.

use std::path::PathBuf;

use wdp_policy::{CallError, Hook, LoadError, PolicyError};

use crate::config::ConfigError;

/// Anything that stops a configuration from being applied or served.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A config file or the directory is unreadable or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A guest bound to a hook cannot be put in service.
    #[error("{file}: hook {hook}: guest {}: {source}", guest.display())]
    Guest {
        /// The resource file that binds the guest.
        file: PathBuf,
        /// The hook it is bound to.
        hook: Hook,
        /// The guest's path.
        guest: PathBuf,
        /// Why (boxed: load errors are large and this error is returned often).
        #[source]
        source: Box<GuestProblem>,
    },
    /// The hardware a resource selects cannot be read.
    #[error("{}: {source}", file.display())]
    Hardware {
        /// The resource file.
        file: PathBuf,
        /// The hardware error.
        #[source]
        source: wdp_hardware::HardwareError,
    },
    /// Discovery or health produced something that cannot be served (a
    /// refused guest answer, too many devices, an oversized message).
    #[error("{}: {problem}", file.display())]
    Discovery {
        /// The resource file.
        file: PathBuf,
        /// What is wrong, naming the guest and hook where one is at fault.
        problem: String,
    },
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
    /// The Wasm engine could not be created.
    #[error("wasm engine: {0}")]
    Engine(#[source] PolicyError),
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
    /// The CDI folder cannot take the specs of resources with `cdi` on.
    #[error("CDI directory {} (--cdi-dir): {source}", dir.display())]
    CdiDir {
        /// The folder.
        dir: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A DRA resource cannot be served (no node name, no API client).
    #[error("{}: DRA: {problem}", file.display())]
    Dra {
        /// The resource file.
        file: PathBuf,
        /// What is missing.
        problem: String,
    },
    /// A folder cannot be watched for changes.
    #[error("cannot watch {}: {source}", dir.display())]
    Watch {
        /// The folder.
        dir: PathBuf,
        /// notify's error.
        #[source]
        source: notify::Error,
    },
}

/// Why a guest cannot serve the hook it is bound to.
#[derive(Debug, thiserror::Error)]
pub enum GuestProblem {
    /// The file cannot be loaded as a policy component.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The component does not export the hook.
    #[error("does not export the {hook} hook (it exports: {exported})")]
    NotExported {
        /// The hook asked for.
        hook: Hook,
        /// What it exports, comma-separated.
        exported: String,
    },
    /// Calling it with empty input failed.
    #[error("failed its smoke test: {0}")]
    SmokeTest(#[source] CallError),
}
