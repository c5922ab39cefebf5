//! Which kubelet API serves a resource: the `api` and `driver` keys, the
//! keys a DRA resource may not set because only the device-plugin API has a
//! meaning for them, and the DRA-only `publish-interval-ms`. Every refusal
//! names the file and the key.

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
            crate::cdi::check_kind(&raw.resource)
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

/// The write interval of a DRA resource's ResourceSlices: `publish-interval-ms`
/// within [`PUBLISH_INTERVAL_MS`], or the publisher's default (1 s). Refused,
/// by file and key, out of range or on a device-plugin resource.
pub(super) fn publish_interval(file: &Path, raw: &RawResource) -> Result<Duration, ConfigError> {
    const FIELD: &str = "publish-interval-ms";
    let Some(ms) = raw.publish_interval_ms else {
        return Ok(wdp_dra_client::DEFAULT_MIN_WRITE_INTERVAL);
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

/// A DRA driver name: a DNS subdomain of at most 63 characters (what the
/// ResourceSlice `driver` field accepts), by `wdp_dra_client`'s rule.
pub fn validate_driver_name(driver: &str) -> Result<(), String> {
    wdp_dra_client::naming::check_driver_name(driver).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::{HostSettings, ResourceConfig, parse_resource};
    use super::*;

    fn parse(text: &str) -> Result<ResourceConfig, ConfigError> {
        parse_resource(
            Path::new("/cfg"),
            Path::new("/cfg/gpu.toml"),
            text,
            &HostSettings::default(),
        )
    }

    fn dra_with(extra: &str) -> String {
        format!(
            "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\n{extra}[[nodes]]\npath = \"/dev/dri/renderD*\"\n"
        )
    }

    #[test]
    fn a_dra_resource_has_a_driver_and_no_device_plugin_socket() {
        let r = parse(&dra_with("driver = \"gpu.example.com\"\n")).unwrap();
        assert_eq!(r.api, ServingApi::Dra);
        assert_eq!(r.driver.as_deref(), Some("gpu.example.com"));
        assert!(r.socket.is_empty());
        assert!(!r.get_preferred_allocation);
    }

    #[test]
    fn a_dra_resource_whose_cdi_kind_starts_with_a_digit_is_refused() {
        for resource in ["1bars.example.com/acc", "bars.example.com/1acc"] {
            let text = format!(
                "version = 1\nresource = \"{resource}\"\napi = \"dra\"\ndriver = \"bars.example.com\"\n[[nodes]]\npath = \"/dev/dri/renderD*\"\n"
            );
            let error = parse(&text).unwrap_err().to_string();
            assert!(error.contains("/cfg/gpu.toml"), "{resource}: {error}");
            assert!(error.contains("`resource`"), "{resource}: {error}");
            assert!(
                error.contains("must start with a letter"),
                "{resource}: {error}"
            );
        }
    }

    #[test]
    fn a_dra_resource_without_a_driver_or_with_a_bad_one_is_refused() {
        let error = parse(&dra_with("")).unwrap_err().to_string();
        assert!(
            error.contains("/cfg/gpu.toml") && error.contains("`driver`"),
            "{error}"
        );
        let error = parse(&dra_with("driver = \"GPU_driver\"\n"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("GPU_driver"), "{error}");
    }

    #[test]
    fn the_publish_interval_defaults_to_a_second_and_is_bounded_by_name() {
        let r = parse(&dra_with("driver = \"gpu.example.com\"\n")).unwrap();
        assert_eq!(r.publish_interval, Duration::from_secs(1));
        let r = parse(&dra_with(
            "driver = \"gpu.example.com\"\npublish-interval-ms = 5000\n",
        ))
        .unwrap();
        assert_eq!(r.publish_interval, Duration::from_secs(5));
        for bad in ["0", "99", "-1", "600001"] {
            let text = dra_with(&format!(
                "driver = \"gpu.example.com\"\npublish-interval-ms = {bad}\n"
            ));
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.contains("/cfg/gpu.toml")
                    && error.contains("`publish-interval-ms`")
                    && error.contains("100 to 600000 milliseconds"),
                "{bad}: {error}"
            );
        }
        let text = "version = 1\nresource = \"example.com/gpu\"\npublish-interval-ms = 1000\n[[nodes]]\npath = \"/dev/fuse\"\n";
        let error = parse(text).unwrap_err().to_string();
        assert!(
            error.contains("`publish-interval-ms`") && error.contains("api = \"dra\""),
            "{error}"
        );
    }

    #[test]
    fn a_driver_on_a_device_plugin_resource_is_refused() {
        let text = "version = 1\nresource = \"example.com/gpu\"\ndriver = \"gpu.example.com\"\n[[nodes]]\npath = \"/dev/fuse\"\n";
        let error = parse(text).unwrap_err().to_string();
        assert!(
            error.contains("`driver`") && error.contains("api = \"dra\""),
            "{error}"
        );
    }

    #[test]
    fn keys_without_a_dra_meaning_are_refused_by_name() {
        for (extra, field) in [
            (
                "[hooks.preferred-allocation]\nguest = \"p.wasm\"\n",
                "hooks.preferred-allocation",
            ),
            (
                "get-preferred-allocation = true\n",
                "get-preferred-allocation",
            ),
            ("socket = \"gpu.sock\"\n", "socket"),
            ("cdi = \"names\"\n", "cdi"),
        ] {
            // Tables must come after the top-level keys.
            let text = if extra.starts_with('[') {
                format!("{}{extra}", dra_with("driver = \"gpu.example.com\"\n"))
            } else {
                dra_with(&format!("driver = \"gpu.example.com\"\n{extra}"))
            };
            let error = parse(&text).unwrap_err().to_string();
            assert!(
                error.contains("/cfg/gpu.toml") && error.contains(&format!("`{field}`")),
                "{field}: {error}"
            );
        }
    }
}
