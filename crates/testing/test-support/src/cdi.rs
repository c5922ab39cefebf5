//! CDI specs read back the way a container runtime reads them.

use std::path::Path;

/// Reads a CDI spec the host wrote, after checking it the way container
/// runtimes' CDI library does: the upstream JSON schema, and a
/// `cdiVersion` equal to the library's `MinimumRequiredVersion` for its
/// content. Panics, naming the file, where either check fails.
pub fn read_cdi_spec(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    container_device_interface::schema::validate_builtin(&bytes)
        .unwrap_or_else(|e| panic!("{} fails the CDI schema: {e:#}", path.display()));
    let upstream: container_device_interface::specs::config::Spec =
        serde_json::from_slice(&bytes).unwrap();
    let minimum = container_device_interface::version::minimum_required_version(&upstream).unwrap();
    let spec: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        spec["cdiVersion"],
        minimum.to_string(),
        "{}",
        path.display()
    );
    spec
}
