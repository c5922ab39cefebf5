
use super::*;

#[test]
fn the_dra_hooks_are_accepted_at_any_0_1_version() {
    for hook in [
        Hook::DraLayout,
        Hook::DraPrepare,
        Hook::DraUnprepare,
        Hook::DeviceTaints,
    ] {
        for version in ["0.1.0", "0.1.2", "0.1.9"] {
            let export = format!("{PACKAGE}/{hook}@{version}");
            assert!(
                matches!(classify_export("g", &export), Ok(Exported::Hook(h)) if h == hook),
                "{export}"
            );
        }
        let newer = format!("{PACKAGE}/{hook}@0.2.0");
        assert!(matches!(
            classify_export("g", &newer),
            Err(LoadError::IncompatibleVersion { .. })
        ));
    }
    assert!(matches!(
        classify_export("g", "wasm-device-plugin:policy/dra-partitions@0.1.2"),
        Err(LoadError::UnknownExport { .. })
    ));
}
