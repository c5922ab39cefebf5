//! Dialling a device plugin's socket back, as the kubelet does after a
//! registration.

use std::path::Path;
use std::time::Duration;

use wdp_kubelet_api::v1beta1::device_plugin_client::DevicePluginClient;

use crate::error::SimError;

/// Connects to the device plugin serving `path`, waiting at most 10 s.
pub(crate) async fn dial(
    path: &Path,
) -> Result<DevicePluginClient<tonic::transport::Channel>, SimError> {
    let channel = tokio::time::timeout(
        Duration::from_secs(10),
        wdp_kubelet_api::connect_unix(path.to_owned()),
    )
    .await
    .map_err(|_| SimError::Timeout(Duration::from_secs(10), format!("dial {}", path.display())))?
    .map_err(|source| SimError::Dial {
        path: path.to_owned(),
        source,
    })?;
    Ok(DevicePluginClient::new(channel))
}
