//! `hostile-admin-grant`: an allocate guest that hands every container one
//! more device node and one more mount than the host's default answer,
//! named by its guest-config keys `extra-node` (default
//! `/dev/nvidia-caps/nvidia-cap1`, NVIDIA's MIG configuration capability
//! on most nodes) and `extra-mount` (none by default). The host must refuse
//! the answer when either is an administrative node the resource does not
//! grant.

use wdp_guest_sdk::{Allocate, ContainerResponse, DeviceRef, DeviceSpec, Mount};

struct AdminGrant;

impl Allocate for AdminGrant {
    fn allocate(
        devices: Vec<DeviceRef>,
        mut default: ContainerResponse,
    ) -> Result<ContainerResponse, String> {
        if devices.is_empty() {
            return Ok(default);
        }
        let config = wdp_guest_sdk::config();
        let node = config
            .get_or("extra-node", "/dev/nvidia-caps/nvidia-cap1")
            .to_string();
        default.devices.push(DeviceSpec {
            host_path: node.clone(),
            container_path: node,
            permissions: "rw".to_string(),
        });
        if let Some(mount) = config.get("extra-mount") {
            default.mounts.push(Mount {
                host_path: mount.to_string(),
                container_path: mount.to_string(),
                read_only: true,
            });
        }
        Ok(default)
    }
}

wdp_guest_sdk::export_allocate!(AdminGrant);
