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
    assert_eq!(r.get_preferred_allocation, None);
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

#[test]
fn device_metadata_is_on_for_dra_switchable_and_refused_by_name_elsewhere() {
    let r = parse(&dra_with("driver = \"gpu.example.com\"\n")).unwrap();
    assert!(r.device_metadata, "on by default");
    let r = parse(&dra_with(
        "driver = \"gpu.example.com\"\ndevice-metadata = false\n",
    ))
    .unwrap();
    assert!(!r.device_metadata);
    let error = parse(&dra_with(
        "driver = \"gpu.example.com\"\ndevice-metadata = \"no\"\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(error.contains("device-metadata"), "{error}");
    let text = "version = 1\nresource = \"example.com/gpu\"\ndevice-metadata = true\n[[nodes]]\npath = \"/dev/fuse\"\n";
    let error = parse(text).unwrap_err().to_string();
    assert!(
        error.contains("`device-metadata`") && error.contains("api = \"dra\""),
        "{error}"
    );
    let r = parse(&text.replace("device-metadata = true\n", "")).unwrap();
    assert!(
        !r.device_metadata,
        "a device-plugin resource prepares no claims"
    );
}
