//! The error of putting a resource in service: its guests loaded and
//! smoke-tested, its hardware read, its discovery and health answered.
//! Each variant names the resource file and, where one is at fault, the
//! guest and hook, and keeps its cause as the error source.

use std::path::PathBuf;

use wdp_policy::{CallError, Hook, LoadError, PolicyError};

/// Anything that stops a resource's configuration from being served.
#[derive(Debug, thiserror::Error)]
pub enum ResourceError {
    /// A guest bound to a hook cannot be put in service.
    #[error("{file}: hook {hook}: guest {}: {}", guest.display(), unrepeated(source, guest))]
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
    /// The Wasm engine could not be created.
    #[error("wasm engine: {0}")]
    Engine(#[source] PolicyError),
}

/// `problem` in words, without the `guest <path>` its message starts with
/// when the message around it names the guest already.
fn unrepeated(problem: &GuestProblem, guest: &std::path::Path) -> String {
    let text = problem.to_string();
    let shown = guest.display().to_string();
    for prefix in [
        format!("guest {shown}: "),
        format!("guest {shown:?}: "),
        format!("guest {shown:?} "),
    ] {
        if let Some(rest) = text.strip_prefix(&prefix) {
            return rest.to_owned();
        }
    }
    text
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
