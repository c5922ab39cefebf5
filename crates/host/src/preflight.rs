//! What must hold of the node's folders before a configuration is served
//! (at start and at every reload): the device-plugin, plugins registry,
//! CDI, plugins and state folders usable, every socket path short enough
//! for a Unix socket address, and a node name for DRA drivers. Each
//! refusal names the folder or the resource file at fault.

use std::path::Path;

use wdp_config::CdiMode;
use wdp_config::ConfigSet;
use wdp_config::limits::MAX_SOCKET_PATH_BYTES;
use wdp_kubelet_socket::plugin_watcher::{dra_registration_socket_name, registration_socket_name};

use crate::error::HostError;
use crate::options::HostOptions;

/// When any resource writes CDI specs, the CDI folder must exist (it is
/// created if missing) and accept new files.
pub(crate) fn check_cdi_dir(dir: &Path, config: &ConfigSet) -> Result<(), HostError> {
    if config.resources.values().all(|r| r.cdi == CdiMode::Off) {
        return Ok(());
    }
    let fail = |source| HostError::CdiDir {
        dir: dir.to_owned(),
        source,
    };
    wdp_cdi::check_dir(dir).map_err(fail)
}

/// When a DRA resource is configured: the node name is known, the plugins
/// registry folder exists, the plugins and state folders can be created,
/// and every driver's sockets fit a Unix socket address.
pub(crate) fn check_dra_setup(options: &HostOptions, config: &ConfigSet) -> Result<(), HostError> {
    let drivers: Vec<(&str, &wdp_config::ResourceConfig)> = config.dra_resources().collect();
    let Some((_, first)) = drivers.first() else {
        return Ok(());
    };
    if options.node_name.is_empty() {
        return Err(HostError::NoNodeName {
            file: first.file.clone(),
        });
    }
    check_plugin_dir(&options.plugins_registry_dir)?;
    wdp_cdi::check_dir(&options.cdi_dir).map_err(|source| HostError::CdiDir {
        dir: options.cdi_dir.clone(),
        source,
    })?;
    for dir in [&options.plugins_dir, &options.state_dir] {
        std::fs::create_dir_all(dir).map_err(|source| HostError::PluginDir {
            dir: dir.clone(),
            source,
        })?;
    }
    for (driver, resource) in drivers {
        for path in [
            options
                .plugins_dir
                .join(driver)
                .join(wdp_kubelet_api::dra::DRA_SOCKET),
            options
                .plugins_registry_dir
                .join(dra_registration_socket_name(driver)),
        ] {
            let len = path.as_os_str().len();
            if len > MAX_SOCKET_PATH_BYTES {
                return Err(HostError::SocketPath {
                    file: resource.file.clone(),
                    path,
                    len,
                    max: MAX_SOCKET_PATH_BYTES,
                });
            }
        }
    }
    Ok(())
}

/// Every resource's registration socket must fit a Unix socket address in
/// the plugins registry folder.
pub(crate) fn check_registration_socket_paths(
    dir: &Path,
    config: &ConfigSet,
) -> Result<(), HostError> {
    for resource in config.device_plugin_resources() {
        let path = dir.join(registration_socket_name(&resource.socket));
        let len = path.as_os_str().len();
        if len > MAX_SOCKET_PATH_BYTES {
            return Err(HostError::SocketPath {
                file: resource.file.clone(),
                path,
                len,
                max: MAX_SOCKET_PATH_BYTES,
            });
        }
    }
    Ok(())
}

/// The device-plugin folder (and, on the plugin-watcher path, the plugins
/// registry folder) must exist and accept new sockets: a directory this
/// process may write to and enter, on a file system mounted read-write.
///
/// Asked of the kernel (`faccessat` with the effective IDs: permissions,
/// capabilities, security modules and read-only mounts) rather than by
/// creating and removing a probe file, which cost about half a millisecond
/// of ext4 inode allocation at every start.
pub(crate) fn check_plugin_dir(dir: &Path) -> Result<(), HostError> {
    let fail = |source| HostError::PluginDir {
        dir: dir.to_owned(),
        source,
    };
    let meta = std::fs::metadata(dir).map_err(fail)?;
    if !meta.is_dir() {
        return Err(fail(std::io::Error::new(
            std::io::ErrorKind::NotADirectory,
            "not a directory",
        )));
    }
    rustix::fs::accessat(
        rustix::fs::CWD,
        dir,
        rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        rustix::fs::AtFlags::EACCESS,
    )
    .map_err(|errno| fail(errno.into()))
}

#[cfg(test)]
#[path = "preflight_tests.rs"]
mod tests;
