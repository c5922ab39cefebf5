use super::*;

#[test]
fn the_dra_hooks_are_accepted_at_any_0_1_version() {
    for hook in [
        Hook::DraLayout,
        Hook::DraPrepare,
        Hook::DraUnprepare,
        Hook::DeviceTaints,
        Hook::DeviceTaintsV2,
        Hook::Passthrough,
    ] {
        for version in ["0.1.0", "0.1.2", "0.1.3", "0.1.9"] {
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

/// Each world of a WIT file: its exports, `include`d worlds resolved.
fn world_exports(wit: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut direct: std::collections::BTreeMap<String, (Vec<String>, Vec<String>)> =
        std::collections::BTreeMap::new();
    let mut current: Option<String> = None;
    for line in wit.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("world ") {
            let name = rest.trim_end_matches('{').trim().to_owned();
            direct.entry(name.clone()).or_default();
            current = Some(name);
        } else if line == "}" {
            current = None;
        } else if let Some(world) = &current {
            let entry = direct.get_mut(world).unwrap();
            if let Some(export) = line.strip_prefix("export ") {
                entry.0.push(export.trim_end_matches(';').to_owned());
            } else if let Some(include) = line.strip_prefix("include ") {
                entry.1.push(include.trim_end_matches(';').to_owned());
            }
        }
    }
    let resolve = |name: &str| {
        let mut exports = Vec::new();
        let mut pending = vec![name.to_owned()];
        while let Some(world) = pending.pop() {
            let (own, includes) = &direct[&world];
            exports.extend(own.iter().cloned());
            pending.extend(includes.iter().cloned());
        }
        exports.sort();
        exports
    };
    direct
        .keys()
        .map(|name| (name.clone(), resolve(name)))
        .collect()
}

#[test]
fn every_world_of_the_earlier_wit_releases_keeps_its_exports() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap();
    let now = world_exports(&read("wit/policy.wit"));
    // wasm-device-plugin:policy@0.1.1 and @0.1.2, as the compat guests
    // keep them.
    for (release, file, worlds) in [
        ("0.1.1", "guests/compat/previous-patch/wit/policy.wit", 7),
        ("0.1.2", "guests/compat/taints-0-1-2/wit/policy.wit", 11),
    ] {
        let text = read(file);
        assert!(
            text.contains(&format!("package wasm-device-plugin:policy@{release};")),
            "{file} is not the {release} release"
        );
        let previous = world_exports(&text);
        assert!(
            previous.contains_key("all-hooks") && previous.len() >= worlds,
            "{release}: {previous:?}"
        );
        for (world, exports) in &previous {
            assert_eq!(
                now.get(world),
                Some(exports),
                "world `{world}` of the {release} WIT release changed its exports: guests written against it no longer compile"
            );
        }
    }
    assert_eq!(now["all-hooks-dra"].len(), now["all-hooks"].len() + 4);
    // 0.1.3: each new hook in a world of its own, and both in the new
    // aggregate world.
    for (world, export) in [
        ("device-taints-v2-guest", "device-taints-v2"),
        ("passthrough-guest", "passthrough"),
    ] {
        assert_eq!(now[world], [export], "{world}");
    }
    assert_eq!(now["all-hooks-v2"].len(), now["all-hooks-dra"].len() + 2);
}
