//! Which exports of a component are hooks: every export must be a hook
//! (any of [`Hook::ALL`], the hooks of 0.1.2 and 0.1.3 included, at any 0.1.x)
//! (or the by-index companion of `preferred-allocation`) of
//! `wasm-device-plugin:policy` at a version compatible with the one this
//! host implements ([`WIT_VERSION`]); exports language toolchains add on
//! their own are ignored.

use crate::error::LoadError;
use crate::hook::Hook;
use crate::indexed_export;

/// The WIT package version this host implements (guests built against any
/// `0.1.x` load: 0.1.0 to 0.1.2 guests unchanged, later 0.1 patches by
/// semver).
pub const WIT_VERSION: &str = "0.1.3";

/// The WIT package every hook belongs to.
const PACKAGE: &str = "wasm-device-plugin:policy";
/// The guest versions it accepts.
const HOST_RANGE: &str = "0.1.x";

/// What an export of the package is.
pub(crate) enum Exported {
    /// One of the hooks.
    Hook(Hook),
    /// `preferred-allocation-indexed`, the by-index companion of
    /// `preferred-allocation`.
    Indexed,
}

/// Exports language toolchains add on their own, which are never called:
/// componentize-py leaves its build-time init entry `exports`.
pub(crate) const TOOLCHAIN_EXPORTS: &[&str] = &["exports"];

/// Maps an export name to its hook, refusing anything else.
pub(crate) fn classify_export(guest: &str, export: &str) -> Result<Exported, LoadError> {
    let unknown = || LoadError::UnknownExport {
        guest: guest.to_string(),
        export: export.to_string(),
    };
    let (path, version) = match export.split_once('@') {
        Some((path, version)) => (path, Some(version)),
        None => (export, None),
    };
    let Some((package, interface)) = path.split_once('/') else {
        return Err(unknown());
    };
    if package != PACKAGE {
        return Err(unknown());
    }
    let exported = if interface == indexed_export::INTERFACE {
        Exported::Indexed
    } else {
        Exported::Hook(interface.parse().map_err(|_| unknown())?)
    };
    let incompatible = |found: &str| LoadError::IncompatibleVersion {
        guest: guest.to_string(),
        export: export.to_string(),
        found: found.to_string(),
        host: WIT_VERSION,
        host_range: HOST_RANGE,
    };
    let Some(version) = version else {
        return Err(incompatible("none"));
    };
    let parsed = semver::Version::parse(version).map_err(|_| incompatible(version))?;
    if parsed.major != 0 || parsed.minor != 1 || !parsed.pre.is_empty() {
        return Err(incompatible(version));
    }
    Ok(exported)
}

#[cfg(test)]
#[path = "exports_tests.rs"]
mod tests;
