//! `[passthrough]`: a DRA resource whose prepared devices need another
//! kernel driver (`vfio-pci`, for a virtual machine). The host binds a
//! claim's devices, with every function of their IOMMU groups, to
//! `bind-driver` once the claim is allocated and before the pod is bound
//! (the slices name a binding condition the scheduler waits for), and binds
//! them back to the drivers they had at unprepare. Binding is opt-in per
//! resource: only a resource with this table ever writes to sysfs. Every
//! refusal names the file and the key.

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::schema::{RawResource, ServingApi};

/// The `[passthrough]` table, as written.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub(super) struct RawPassthrough {
    /// The kernel driver prepared devices are bound to, e.g. `vfio-pci`.
    pub(super) bind_driver: String,
    /// How long one group's bind or unbind may take. Read as the widest
    /// TOML integer so that a negative value is refused by name.
    #[serde(default)]
    pub(super) bind_timeout_ms: Option<i64>,
}

/// A validated `[passthrough]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Passthrough {
    /// The kernel driver prepared devices are bound to, e.g. `vfio-pci`.
    pub bind_driver: String,
    /// How long one group's bind (or bind back) may take before it is
    /// undone and the claim's binding fails.
    pub bind_timeout: Duration,
}

/// The `bind-timeout-ms` values accepted: binding takes from a fraction of
/// a second to seconds (a GPU driver letting go of its device); past two
/// minutes the scheduler, which waits up to ten for the binding condition,
/// would better try another node.
pub const BIND_TIMEOUT_MS: RangeInclusive<i64> = 100..=120_000;

/// `bind-timeout-ms` when the table sets none.
pub const DEFAULT_BIND_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads `[passthrough]`: only on a DRA resource that selects PCI
/// functions, a kernel driver name, a timeout within [`BIND_TIMEOUT_MS`].
pub(super) fn passthrough(
    file: &Path,
    raw: &RawResource,
) -> Result<Option<Passthrough>, ConfigError> {
    let Some(table) = &raw.passthrough else {
        return Ok(None);
    };
    if raw.api != ServingApi::Dra {
        return Err(ConfigError::invalid(
            file,
            "passthrough",
            "only a resource with `api = \"dra\"` binds devices on demand: the binding happens between a claim's allocation and its pod's binding, which the device-plugin API does not have",
        ));
    }
    if raw.pci.is_empty() {
        return Err(ConfigError::invalid(
            file,
            "passthrough",
            "binding to another kernel driver needs PCI functions: add [[pci]] selectors",
        ));
    }
    if let Some(index) = raw.pci.iter().position(|p| p.driver.is_some()) {
        return Err(ConfigError::invalid(
            file,
            &format!("pci[{index}].driver"),
            "a resource that binds its devices to another driver must not select them by driver: a bound device would leave the resource; select by vendor, class or address",
        ));
    }
    check_driver_name(&table.bind_driver)
        .map_err(|why| ConfigError::invalid(file, "passthrough.bind-driver", why))?;
    let bind_timeout = match table.bind_timeout_ms {
        None => DEFAULT_BIND_TIMEOUT,
        Some(ms) if BIND_TIMEOUT_MS.contains(&ms) => Duration::from_millis(ms.unsigned_abs()),
        Some(ms) => {
            return Err(ConfigError::invalid(
                file,
                "passthrough.bind-timeout-ms",
                format!(
                    "{ms} is out of range: one group's bind may take {} to {} milliseconds",
                    BIND_TIMEOUT_MS.start(),
                    BIND_TIMEOUT_MS.end()
                ),
            ));
        }
    };
    Ok(Some(Passthrough {
        bind_driver: table.bind_driver.clone(),
        bind_timeout,
    }))
}

/// A kernel driver's name as `/sys/bus/pci/drivers/<name>` shows it: 1 to
/// 64 characters of ASCII letters, digits, `_` and `-` (so it can never
/// name a path outside that folder).
fn check_driver_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "{name:?} is not a kernel driver name: 1 to 64 characters, e.g. \"vfio-pci\""
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "{name:?} is not a kernel driver name: only letters, digits, `_` and `-`, e.g. \"vfio-pci\""
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{HostSettings, ResourceConfig, parse_resource};
    use super::*;

    fn parse(text: &str) -> Result<ResourceConfig, ConfigError> {
        parse_resource(
            Path::new("/cfg"),
            Path::new("/cfg/vfio.toml"),
            text,
            &HostSettings::default(),
        )
    }

    const DRA_PCI: &str = "version = 1\nresource = \"example.com/vfio\"\napi = \"dra\"\ndriver = \"vfio.example.com\"\n[[pci]]\nvendor = \"10de\"\n";

    #[test]
    fn a_dra_pci_resource_binds_to_the_driver_it_names() {
        let r = parse(&format!(
            "{DRA_PCI}[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = 2500\n"
        ))
        .unwrap();
        let passthrough = r.passthrough.unwrap();
        assert_eq!(passthrough.bind_driver, "vfio-pci");
        assert_eq!(passthrough.bind_timeout, Duration::from_millis(2500));
        let r = parse(&format!(
            "{DRA_PCI}[passthrough]\nbind-driver = \"vfio-pci\"\n"
        ))
        .unwrap();
        assert_eq!(r.passthrough.unwrap().bind_timeout, DEFAULT_BIND_TIMEOUT);
        assert_eq!(parse(DRA_PCI).unwrap().passthrough, None);
    }

    #[test]
    fn each_mistake_is_refused_by_file_and_key() {
        let cases = [
            (
                format!("{DRA_PCI}[passthrough]\nbind-driver = \"../nvidia\"\n"),
                "`passthrough.bind-driver`",
            ),
            (
                format!("{DRA_PCI}[passthrough]\nbind-driver = \"vfio-pci\"\nbind-timeout-ms = -1\n"),
                "`passthrough.bind-timeout-ms`",
            ),
            (
                format!("{DRA_PCI}[passthrough]\nbind-driver = \"vfio-pci\"\nunbind = true\n"),
                "unbind",
            ),
            (
                "version = 1\nresource = \"example.com/vfio\"\n[[pci]]\nvendor = \"10de\"\n[passthrough]\nbind-driver = \"vfio-pci\"\n".to_owned(),
                "only a resource with `api = \"dra\"`",
            ),
            (
                format!("{DRA_PCI}driver = \"nvidia\"\n[passthrough]\nbind-driver = \"vfio-pci\"\n"),
                "`pci[0].driver`",
            ),
            (
                "version = 1\nresource = \"example.com/vfio\"\napi = \"dra\"\ndriver = \"vfio.example.com\"\n[[nodes]]\npath = \"/dev/vfio/*\"\n[passthrough]\nbind-driver = \"vfio-pci\"\n".to_owned(),
                "[[pci]]",
            ),
        ];
        for (text, expected) in cases {
            let error = parse(&text).unwrap_err().to_string();
            assert!(error.contains("/cfg/vfio.toml"), "{error}");
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn driver_names_cannot_leave_the_drivers_folder() {
        assert!(check_driver_name("vfio-pci").is_ok());
        assert!(check_driver_name("nvidia_vgpu_vfio").is_ok());
        for bad in ["", "../nvidia", "vfio pci", "a/b", &"x".repeat(65)] {
            assert!(check_driver_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
