//! Tests of the CDI naming rules.

use super::*;

#[test]
fn kinds_and_names_follow_the_cdi_rules() {
    check_kind("example.com/gpu").unwrap();
    check_kind("nvidia.com/gpu.mig").unwrap();
    assert!(check_kind("example.com/gpu-").is_err());
    assert!(check_kind("gpu").is_err());
    // What the CDI parser refuses ("should start with letter").
    for kind in ["1bars.example.com/acc", "bars.example.com/1acc"] {
        let error = check_kind(kind).unwrap_err();
        assert!(error.contains("must start with a letter"), "{error}");
    }
    check_kind("bars2.example.com/acc9").unwrap();
    check_device_name("0000:3b:00.4").unwrap();
    check_device_name("fuse::3").unwrap();
    assert!(check_device_name("net-").is_err());
    assert!(check_device_name("a b").is_err());
}
