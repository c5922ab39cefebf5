//! Which kubelet API serves a resource: the `api` and `driver` keys, the
//! keys a DRA resource may not set because only the device-plugin API has a
//! meaning for them, and the DRA-only `publish-interval-ms` and
//! `device-metadata`. Every refusal names the file and the key.

use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use super::error::ConfigError;
use super::schema::{CdiMode, RawResource, ServingApi};

/// Checks `api` and `driver` together: a DRA resource names a driver and
/// sets nothing that only the device-plugin API has (the scheduler picks
/// DRA devices, so a preferred-allocation guest has no DRA meaning; CDI
/// specs are always written per claim); a device-plugin resource names no
/// driver. Returns the driver of a DRA resource.
pub(super) fn check_serving_api(
    file: &Path,
    raw: &RawResource,
) -> Result<Option<String>, ConfigError> {
    match raw.api {
        ServingApi::DevicePlugin => match &raw.driver {
            Some(_) => Err(ConfigError::invalid(
                file,
                "driver",
                "only a resource with `api = \"dra\"` names a DRA driver",
            )),
            None => Ok(None),
        },
        ServingApi::Dra => {
            let Some(driver) = &raw.driver else {
                return Err(ConfigError::invalid(
                    file,
                    "driver",
                    "a resource with `api = \"dra\"` must name its DRA driver, a DNS subdomain such as gpu.example.com",
                ));
            };
            validate_driver_name(driver).map_err(|p| ConfigError::invalid(file, "driver", p))?;
            let device_plugin_only = [
                (
                    raw.hooks.preferred_allocation.is_some(),
                    "hooks.preferred-allocation",
                    "the scheduler chooses DRA devices (by the DeviceClass and claim CEL selectors), so a preferred-allocation guest is never called; remove the hook",
                ),
                (
                    raw.get_preferred_allocation.is_some(),
                    "get-preferred-allocation",
                    "GetPreferredAllocation is a device-plugin call; DRA has none",
                ),
                (
                    raw.pre_start_required.is_some(),
                    "pre-start-required",
                    "a DRA resource runs its pre-start guest (when bound) while the claim is prepared; there is no PreStartContainer call to register",
                ),
                (
                    raw.socket.is_some(),
                    "socket",
                    "a DRA resource is served on <plugins-dir>/<driver>/dra.sock, not on a device-plugin socket",
                ),
                (
                    raw.cdi != CdiMode::Off,
                    "cdi",
                    "a DRA resource always hands containers its devices through a CDI spec written per claim; remove `cdi`",
                ),
            ];
            for (set, field, why) in device_plugin_only {
                if set {
                    return Err(ConfigError::invalid(
                        file,
                        field,
                        format!("not allowed with `api = \"dra\"`: {why}"),
                    ));
                }
            }
            wdp_cdi::names::check_kind(&raw.resource)
                .map_err(|p| ConfigError::invalid(file, "resource", p))?;
            Ok(Some(driver.clone()))
        }
    }
}

/// The `publish-interval-ms` values accepted: from 100 ms (a flapping device
/// could otherwise cost its pool ten writes a second) to 10 minutes (a second
/// health change within the interval waits for its end, and an unhealthy
/// device stays schedulable until then).
pub const PUBLISH_INTERVAL_MS: RangeInclusive<i64> = 100..=600_000;

/// The shortest time between two ResourceSlice writes of a DRA resource's
/// pool when its file sets no `publish-interval-ms`: the driver hands it to
/// the publisher (`PoolTarget::with_min_write_interval`).
pub const DEFAULT_PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// The write interval of a DRA resource's ResourceSlices: `publish-interval-ms`
/// within [`PUBLISH_INTERVAL_MS`], or [`DEFAULT_PUBLISH_INTERVAL`] (1 s). Refused,
/// by file and key, out of range or on a device-plugin resource.
pub(super) fn publish_interval(file: &Path, raw: &RawResource) -> Result<Duration, ConfigError> {
    const FIELD: &str = "publish-interval-ms";
    let Some(ms) = raw.publish_interval_ms else {
        return Ok(DEFAULT_PUBLISH_INTERVAL);
    };
    if raw.api != ServingApi::Dra {
        return Err(ConfigError::invalid(
            file,
            FIELD,
            "only a resource with `api = \"dra\"` publishes ResourceSlices; remove it",
        ));
    }
    if !PUBLISH_INTERVAL_MS.contains(&ms) {
        return Err(ConfigError::invalid(
            file,
            FIELD,
            format!(
                "{ms} is out of range: the shortest time between two ResourceSlice writes of the pool must be {} to {} milliseconds",
                PUBLISH_INTERVAL_MS.start(),
                PUBLISH_INTERVAL_MS.end()
            ),
        ));
    }
    Ok(Duration::from_millis(ms.unsigned_abs()))
}

/// Whether a DRA resource writes device metadata files: `device-metadata`,
/// on when unset; refused, by file and key, on a device-plugin resource
/// (it prepares no claims). A device-plugin resource answers `false`.
pub(super) fn device_metadata(file: &Path, raw: &RawResource) -> Result<bool, ConfigError> {
    match (raw.api, raw.device_metadata) {
        (ServingApi::Dra, set) => Ok(set.unwrap_or(true)),
        (ServingApi::DevicePlugin, None) => Ok(false),
        (ServingApi::DevicePlugin, Some(_)) => Err(ConfigError::invalid(
            file,
            "device-metadata",
            "only a resource with `api = \"dra\"` prepares claims and writes their device metadata files; remove it",
        )),
    }
}

/// A DRA driver name: a DNS subdomain of at most 63 characters (what the
/// ResourceSlice `driver` field accepts), by `wdp_k8s_naming`'s rule.
pub fn validate_driver_name(driver: &str) -> Result<(), String> {
    wdp_k8s_naming::check_driver_name(driver).map_err(|e| e.to_string())
}

#[cfg(test)]
#[path = "serving_tests.rs"]
mod tests;
