//! Typed errors of discovery and watching.

use std::path::PathBuf;

/// An error of discovery or watching. Every variant names the path, pattern
/// or selector field at fault; paths are host paths.
#[derive(Debug, thiserror::Error)]
pub enum HardwareError {
    /// A node path pattern that is not a valid glob or not absolute.
    #[error("bad device node pattern {pattern:?}: {message}")]
    BadPattern {
        /// The pattern as written in the selector.
        pattern: String,
        /// What is wrong with it.
        message: String,
    },
    /// A literal (non-glob) node path that does not exist and is not `optional`.
    #[error("device node {} does not exist (mark the selector `optional = true` if it may be absent)", path.display())]
    NodeMissing {
        /// Host path of the missing node.
        path: PathBuf,
    },
    /// A selector field whose value cannot match anything as written.
    #[error("invalid {selector} selector field `{field}` = {value:?}: {reason}")]
    BadSelector {
        /// `pci`, `usb` or `nodes`.
        selector: &'static str,
        /// The field's config key (kebab-case).
        field: &'static str,
        /// The value as written.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// An I/O error reading a path.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// Host path being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
