//! `allocate-shaper`: an allocate guest.
//!
//! Adds `<PREFIX>_VISIBLE_DEVICES=<device ids, comma-separated>` (prefix from
//! the config key `env-prefix`, default `WDP`) and the annotation
//! `wasm-device-plugin/devices` with the same list. Keeps the default device
//! specs, or, when the config key `cdi-kind` is set (e.g.
//! `example.com/gpu`), answers CDI names `<kind>=<device-id>` instead of
//! device specs.
//!
//! The config key `visible-devices` chooses what the env list names:
//! `id` (default, the device IDs), `index` (the `nvidia.minor` attribute,
//! the GPU's index as the NVIDIA container runtime reads it) or `uuid`
//! (the `nvidia.uuid` attribute, `GPU-…`). A device lacking the attribute
//! asked for is an error naming it.
//!
//! The config key `pci-resource` (a resource name, e.g. `example.com/vfio`)
//! also adds what KubeVirt reads from a device plugin that passes PCI
//! devices through: `PCI_RESOURCE_<NAME>` (the name upper-cased, `.`, `/`
//! and `-` as `_`) listing the PCI addresses of every granted device, from
//! its `pci.addresses` attribute (what `iommu-group` publishes: the
//! functions of the group), comma-separated. A device without the
//! attribute is an error naming it.
//!
//! ```toml
//! [guest-config]
//! env-prefix = "NVIDIA"
//! cdi-kind = "example.com/gpu"
//! visible-devices = "uuid"
//! # pci-resource = "example.com/vfio"   # PCI_RESOURCE_EXAMPLE_COM_VFIO
//! ```

use wdp_guest_sdk::{Allocate, ContainerResponse, DeviceRef};

struct AllocateShaper;

/// Annotation key listing the allocated device IDs.
const ANNOTATION: &str = "wasm-device-plugin/devices";

fn valid_env_prefix(prefix: &str) -> bool {
    !prefix.is_empty()
        && !prefix.starts_with(|c: char| c.is_ascii_digit())
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Allocate for AllocateShaper {
    fn allocate(
        devices: Vec<DeviceRef>,
        default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        let config = wdp_guest_sdk::config();
        let prefix = config.get_or("env-prefix", "WDP").trim().to_string();
        if !valid_env_prefix(&prefix) {
            return Err(format!(
                "guest-config env-prefix {prefix:?} is not a valid env name"
            ));
        }

        // Device IDs without replica suffixes, in request order, once each.
        let mut ids: Vec<&str> = Vec::with_capacity(devices.len());
        for device in &devices {
            if !ids.contains(&device.device_id.as_str()) {
                ids.push(&device.device_id);
            }
        }
        let list = ids.join(",");
        let attribute = match config.get_or("visible-devices", "id").trim() {
            "id" => None,
            "index" => Some("nvidia.minor"),
            "uuid" => Some("nvidia.uuid"),
            other => {
                return Err(format!(
                    "guest-config visible-devices {other:?} must be id, index or uuid"
                ));
            }
        };
        let visible = match attribute {
            None => list.clone(),
            Some(name) => {
                let mut values: Vec<&str> = Vec::with_capacity(ids.len());
                for id in &ids {
                    let device = devices.iter().find(|d| d.device_id == *id);
                    let value = device.and_then(|d| d.attr(name)).ok_or_else(|| {
                        format!("device {id} has no {name} attribute for visible-devices")
                    })?;
                    values.push(value);
                }
                values.join(",")
            }
        };

        let mut response = default;
        response
            .envs
            .retain(|(key, _)| !key.ends_with("_VISIBLE_DEVICES") || !key.starts_with(&prefix));
        response
            .envs
            .push((format!("{prefix}_VISIBLE_DEVICES"), visible));
        response.annotations.retain(|(key, _)| key != ANNOTATION);
        response.annotations.push((ANNOTATION.to_string(), list));

        if let Some(resource) = config
            .get("pci-resource")
            .map(str::trim)
            .filter(|r| !r.is_empty())
        {
            let (name, addresses) = pci_resource_env(resource, &ids, &devices)?;
            response.envs.retain(|(key, _)| *key != name);
            response.envs.push((name, addresses));
        }

        if let Some(kind) = config
            .get("cdi-kind")
            .map(str::trim)
            .filter(|k| !k.is_empty())
        {
            if !kind.contains('/') {
                return Err(format!(
                    "guest-config cdi-kind {kind:?} must look like vendor.com/class"
                ));
            }
            response.devices.clear();
            response.cdi_devices = ids.iter().map(|id| format!("{kind}={id}")).collect();
        }
        Ok(response)
    }
}

/// KubeVirt's `PCI_RESOURCE_<NAME>` for `resource` and the PCI addresses
/// of the devices `ids` (their `pci.addresses`, in request order).
fn pci_resource_env(
    resource: &str,
    ids: &[&str],
    devices: &[DeviceRef],
) -> Result<(String, String), String> {
    if !resource
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '-' | '_'))
    {
        return Err(format!(
            "guest-config pci-resource {resource:?} is not a resource name"
        ));
    }
    let name: String = resource
        .chars()
        .map(|c| match c {
            '.' | '/' | '-' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect();
    let mut addresses: Vec<&str> = Vec::new();
    for id in ids {
        let device = devices.iter().find(|d| d.device_id == *id);
        let listed = device
            .and_then(|d| d.attr("pci.addresses"))
            .ok_or_else(|| {
                format!("device {id} has no pci.addresses attribute for pci-resource")
            })?;
        addresses.extend(listed.split(',').filter(|a| !a.is_empty()));
    }
    Ok((format!("PCI_RESOURCE_{name}"), addresses.join(",")))
}

wdp_guest_sdk::export_allocate!(AllocateShaper);
