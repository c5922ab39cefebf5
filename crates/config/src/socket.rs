//! How a device-plugin resource's socket is named, and whether its path in
//! the device-plugin directory could ever be bound.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::model::{ConfigSet, ResourceConfig};
use crate::limits::MAX_SOCKET_PATH_BYTES;

/// The kubelet's own socket in the device-plugin directory, which no
/// resource's socket may take.
const KUBELET_SOCKET: &str = "kubelet.sock";

/// A socket file name that could be bound in some device-plugin directory:
/// a plain, visible file name other than `kubelet.sock`, without NUL bytes
/// or control characters, no longer than a Unix socket path may be.
/// Whether it fits once joined with the actual directory is
/// [`socket_path`]'s question, asked at run time.
pub fn validate_socket_name(socket: &str) -> Result<(), String> {
    if socket.is_empty()
        || socket.contains('/')
        || socket.starts_with('.')
        || socket == KUBELET_SOCKET
    {
        return Err(format!(
            "`{socket}` must be a plain file name inside the device-plugin directory (not kubelet.sock)"
        ));
    }
    if socket.chars().any(char::is_control) {
        return Err(format!(
            "{socket:?} contains a NUL byte or another control character, which no socket file name may hold"
        ));
    }
    if socket.len() > MAX_SOCKET_PATH_BYTES {
        return Err(format!(
            "`{socket}` is {} bytes long; a Unix socket path holds at most {MAX_SOCKET_PATH_BYTES} \
             bytes, directory included, so it can never be bound",
            socket.len()
        ));
    }
    Ok(())
}

/// `example.com/fuse` → `wdp-example.com-fuse.sock`.
pub fn default_socket_name(resource: &str) -> String {
    format!("wdp-{}.sock", resource.replace('/', "-"))
}

/// The path of `resource`'s socket inside `plugin_dir`, refused (naming the
/// resource file and its `socket` field) when it is longer than a Unix
/// socket path may be, so that it could never be bound. Call it before
/// serving a resource: at start and on every reload.
pub fn socket_path(resource: &ResourceConfig, plugin_dir: &Path) -> Result<PathBuf, ConfigError> {
    let path = plugin_dir.join(&resource.socket);
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        return Err(ConfigError::invalid(
            &resource.file,
            "socket",
            format!(
                "`{}` in the device-plugin directory {} makes the path {} ({len} bytes); a Unix \
                 socket path holds at most {MAX_SOCKET_PATH_BYTES} bytes, so it can never be bound: \
                 set a shorter `socket`",
                resource.socket,
                plugin_dir.display(),
                path.display()
            ),
        ));
    }
    Ok(path)
}

impl ConfigSet {
    /// Refuses the first resource whose socket, joined with the
    /// device-plugin directory `plugin_dir`, is too long to ever be bound
    /// (see [`socket_path`]). `check` cannot know the run-time directory;
    /// `run` calls this at start and on every reload.
    pub fn check_socket_paths(&self, plugin_dir: &Path) -> Result<(), ConfigError> {
        for resource in self.device_plugin_resources() {
            socket_path(resource, plugin_dir)?;
        }
        Ok(())
    }
}
