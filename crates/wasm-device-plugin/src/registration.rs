//! The `--registration` flag of `run`, and the registration flags `check`
//! and `test` take to show per resource how `run` with the same flags would
//! register it.

use std::path::PathBuf;

use wdp_host::{DEFAULT_PLUGINS_REGISTRY_DIR, RegistrationMode, describe_registration};

/// How `run` registers with the kubelet (`--registration`).
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Registration {
    /// The plugin watcher when its directory exists, else `kubelet.sock`.
    Auto,
    /// `kubelet.sock`, the original path.
    Kubelet,
    /// A socket in the plugin watcher's directory.
    PluginWatcher,
}

impl From<Registration> for RegistrationMode {
    fn from(r: Registration) -> Self {
        match r {
            Registration::Auto => Self::Auto,
            Registration::Kubelet => Self::Kubelet,
            Registration::PluginWatcher => Self::PluginWatcher,
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct RegistrationView {
    /// How `run` would register: `auto`, `kubelet` or `plugin-watcher`.
    #[arg(long, value_enum, env = "WDP_REGISTRATION", default_value = "auto")]
    registration: Registration,

    /// The plugin-watcher directory `run` would use.
    #[arg(long, env = "WDP_PLUGINS_REGISTRY_DIR", default_value = DEFAULT_PLUGINS_REGISTRY_DIR)]
    plugins_registry_dir: PathBuf,

    /// The device-plugin directory `run` would use.
    #[arg(
        long,
        env = "WDP_DEVICE_PLUGIN_DIR",
        default_value = "/var/lib/kubelet/device-plugins"
    )]
    device_plugin_dir: PathBuf,
}

impl RegistrationView {
    /// One line: how the resource served on `socket` registers.
    pub fn describe(&self, socket: &str) -> String {
        let mode: RegistrationMode = self.registration.into();
        describe_registration(
            mode.resolve(&self.plugins_registry_dir),
            &self.device_plugin_dir,
            &self.plugins_registry_dir,
            socket,
        )
    }
}
