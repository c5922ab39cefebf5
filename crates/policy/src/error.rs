//! Typed errors of the policy runtime.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::hook::Hook;

/// The engine could not be created.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// wasmtime refused the configuration.
    #[error("cannot create the wasmtime engine: {0}")]
    Engine(String),
    /// The precompiled-component cache directory is unusable.
    #[error("cannot use {dir} as the precompiled guest cache: {detail}")]
    Cache {
        /// The configured directory.
        dir: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// The epoch ticker thread could not be started.
    #[error("cannot start the epoch ticker thread: {0}")]
    Ticker(#[source] std::io::Error),
}

/// A guest was refused at load time. Every message names the guest and the
/// offending item.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The guest file could not be read.
    #[error(
        "guest {path}: cannot read the file: {}",
        wdp_regular_file::io_words(source)
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The guest path is not a regular file (after following symlinks): a
    /// device such as `/dev/zero`, a FIFO, a directory, a socket.
    #[error("guest {path}: {kind}, not a regular file; a guest must be a .wasm component file")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is instead, in words (`a FIFO`, `a directory`, ...).
        kind: &'static str,
    },
    /// The guest file is larger than [`crate::MAX_GUEST_FILE_BYTES`].
    #[error("guest {path}: larger than {limit} bytes, the most a guest file may have")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit in bytes.
        limit: u64,
    },
    /// The guest file's SHA-256 is not the one its configuration pins
    /// ([`crate::PolicyEngine::load_pinned_file`]); nothing was compiled.
    #[error(
        "guest {path}: its SHA-256 is {actual}, but the configuration pins {expected}; \
         the file is refused (deploy the pinned build, or pin the digest `check` prints)"
    )]
    DigestMismatch {
        /// The file.
        path: PathBuf,
        /// The pinned digest (lower-case hex).
        expected: String,
        /// The file's digest (lower-case hex).
        actual: String,
    },
    /// Signatures are required and the guest's is missing, malformed or
    /// made by no trusted key ([`crate::PolicyEngine::load_verified_file`]);
    /// nothing was compiled.
    #[error(transparent)]
    Unverified(#[from] crate::signature::SignatureError),
    /// The bytes are not a valid component (or a core module was given).
    #[error("guest {guest:?} is not a valid WebAssembly component: {detail}")]
    Compile {
        /// Guest name.
        guest: String,
        /// wasmtime's explanation.
        detail: String,
    },
    /// An export that is not one of the hooks.
    #[error(
        "guest {guest:?} exports `{export}`, which is not a hook of wasm-device-plugin:policy@0.1 \
         (known hooks: discovery, health, preferred-allocation, allocate, pre-start, dra-layout, \
         dra-prepare, dra-unprepare, device-taints)"
    )]
    UnknownExport {
        /// Guest name.
        guest: String,
        /// The export's name.
        export: String,
    },
    /// A hook from a semver-incompatible version of the WIT package.
    #[error(
        "guest {guest:?} exports `{export}`, built against wasm-device-plugin:policy@{found}; \
         this host speaks {host} (compatible: {host_range})"
    )]
    IncompatibleVersion {
        /// Guest name.
        guest: String,
        /// The export's name.
        export: String,
        /// The version the guest was built against (`none` when unversioned).
        found: String,
        /// The host's package version.
        host: &'static str,
        /// The versions the host accepts.
        host_range: &'static str,
    },
    /// The Wasm engine, created by the first load, could not be created.
    #[error(transparent)]
    Engine(#[from] PolicyError),
    /// The guest exports no hook at all.
    #[error(
        "guest {guest:?} exports no hook (expected at least one of discovery, health, \
         preferred-allocation, allocate, pre-start, dra-layout, dra-prepare, dra-unprepare, \
         device-taints of wasm-device-plugin:policy@0.1)"
    )]
    NoHook {
        /// Guest name.
        guest: String,
    },
    /// The same hook exported twice (at two versions).
    #[error("guest {guest:?} exports hook {hook} twice: `{first}` and `{second}`")]
    DuplicateHook {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// First export name.
        first: String,
        /// Second export name.
        second: String,
    },
    /// The guest imports something the host does not provide.
    #[error("guest {guest:?} imports `{import}`, which this host does not provide ({detail})")]
    UnknownImport {
        /// Guest name.
        guest: String,
        /// The import (instance, or `instance#function`).
        import: String,
        /// wasmtime's explanation.
        detail: String,
    },
    /// An exported hook's function is missing or has the wrong signature.
    #[error("guest {guest:?} hook {hook}: export `{export}` does not match the WIT: {detail}")]
    Signature {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The export's name.
        export: String,
        /// What does not match.
        detail: String,
    },
    /// The load-time check instance failed.
    #[error("guest {guest:?} failed its load-time check: {source}")]
    Check {
        /// Guest name.
        guest: String,
        /// Why.
        #[source]
        source: CallError,
    },
}

/// What kind of failure a [`CallError`] is; handy as a metrics label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallErrorKind {
    /// The guest trapped (panic, `unreachable`, stack overflow, blocking...).
    Trap,
    /// The call ran past its deadline.
    Timeout,
    /// The guest hit its memory (or table) cap.
    OutOfMemory,
    /// The guest returned `Err(message)`.
    GuestError,
    /// The guest could not be instantiated (e.g. the instance pool is full).
    Instantiate,
    /// The guest does not export the hook.
    NotExported,
}

impl CallErrorKind {
    /// A short snake_case label: `trap`, `timeout`, `out_of_memory`,
    /// `guest_error`, `instantiate`, `not_exported`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallErrorKind::Trap => "trap",
            CallErrorKind::Timeout => "timeout",
            CallErrorKind::OutOfMemory => "out_of_memory",
            CallErrorKind::GuestError => "guest_error",
            CallErrorKind::Instantiate => "instantiate",
            CallErrorKind::NotExported => "not_exported",
        }
    }
}

impl fmt::Display for CallErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One hook call failed. The failure is confined to this call: the guest and
/// the engine keep serving. Every message names the guest and the hook.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("guest {guest:?} hook {hook} timed out after {} ms", timeout.as_millis())]
    Timeout {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The deadline that was exceeded.
        timeout: Duration,
    },
    /// The guest tried to grow its memory (or a table) past the cap.
    #[error("guest {guest:?} hook {hook} ran out of memory (limit {}): {detail}", Bytes(*limit))]
    OutOfMemory {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The memory cap in bytes.
        limit: u64,
        /// What failed.
        detail: String,
    },
    /// The guest trapped.
    #[error("guest {guest:?} hook {hook} trapped: {detail}")]
    Trap {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The trap and, when the guest wrote any, the start of its stderr.
        detail: String,
    },
    /// The guest answered `Err(message)`.
    #[error("guest {guest:?} hook {hook} returned an error: {message}")]
    GuestError {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// The guest's message.
        message: String,
    },
    /// The guest could not be instantiated for the call.
    #[error("guest {guest:?} hook {hook} could not be instantiated: {detail}")]
    Instantiate {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
        /// wasmtime's explanation.
        detail: String,
    },
    /// The guest does not export the hook.
    #[error("guest {guest:?} does not export hook {hook}")]
    NotExported {
        /// Guest name.
        guest: String,
        /// The hook.
        hook: Hook,
    },
}

impl CallError {
    /// The kind of failure.
    pub fn kind(&self) -> CallErrorKind {
        match self {
            CallError::Timeout { .. } => CallErrorKind::Timeout,
            CallError::OutOfMemory { .. } => CallErrorKind::OutOfMemory,
            CallError::Trap { .. } => CallErrorKind::Trap,
            CallError::GuestError { .. } => CallErrorKind::GuestError,
            CallError::Instantiate { .. } => CallErrorKind::Instantiate,
            CallError::NotExported { .. } => CallErrorKind::NotExported,
        }
    }

    /// The guest's name.
    pub fn guest(&self) -> &str {
        match self {
            CallError::Timeout { guest, .. }
            | CallError::OutOfMemory { guest, .. }
            | CallError::Trap { guest, .. }
            | CallError::GuestError { guest, .. }
            | CallError::Instantiate { guest, .. }
            | CallError::NotExported { guest, .. } => guest,
        }
    }

    /// The hook that was called.
    pub fn hook(&self) -> Hook {
        match self {
            CallError::Timeout { hook, .. }
            | CallError::OutOfMemory { hook, .. }
            | CallError::Trap { hook, .. }
            | CallError::GuestError { hook, .. }
            | CallError::Instantiate { hook, .. }
            | CallError::NotExported { hook, .. } => *hook,
        }
    }
}

/// Renders a byte count as `64 MiB`, `512 KiB` or `1000 bytes`.
pub(crate) struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const KIB: u64 = 1024;
        const MIB: u64 = 1024 * KIB;
        match self.0 {
            n if n >= MIB && n % MIB == 0 => write!(f, "{} MiB", n / MIB),
            n if n >= KIB && n % KIB == 0 => write!(f, "{} KiB", n / KIB),
            n => write!(f, "{n} bytes"),
        }
    }
}
