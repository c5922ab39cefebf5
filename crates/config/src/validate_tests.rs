use std::path::PathBuf;

use super::super::socket::socket_path;
use super::*;

fn parse_text(text: &str) -> Result<ResourceConfig, ConfigError> {
    parse_resource(
        Path::new("/cfg"),
        Path::new("/cfg/r.toml"),
        text,
        &HostSettings::default(),
    )
}

fn fuse_with(extra: &str) -> String {
    format!(
        "version = 1\nresource = \"example.com/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\n{extra}"
    )
}

#[test]
fn minimal_resource_gets_defaults() {
    let r = parse_text(&fuse_with("replicas = 4\n")).unwrap();
    assert_eq!(r.socket, "wdp-example.com-fuse.sock");
    assert!(!r.pre_start_required);
    assert_eq!(r.get_preferred_allocation, None, "decided by the devices");
    assert_eq!(r.replicas.get(&0), Some(&4));
    assert_eq!(r.permissions, "rw");
}

#[test]
fn a_cdi_kind_the_cdi_parser_refuses_is_refused_by_file_and_field() {
    for resource in ["1bars.example.com/acc", "bars.example.com/1acc"] {
        let text = format!(
            "version = 1\nresource = \"{resource}\"\ncdi = \"names\"\n[[nodes]]\npath = \"/dev/fuse\"\n"
        );
        let err = parse_text(&text).unwrap_err().to_string();
        assert!(err.contains("/cfg/r.toml"), "{resource}: {err}");
        assert!(err.contains("`resource`"), "{resource}: {err}");
        assert!(
            err.contains("must start with a letter"),
            "{resource}: {err}"
        );
    }
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let err = parse_text("version = 1\nresource = \"example.com/fuse\"\nreplica = 3\n[[nodes]]\npath = \"/dev/fuse\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("/cfg/r.toml"), "{err}");
    assert!(err.contains("replica"), "{err}");
    assert!(err.contains("line 3"), "{err}");
}

#[test]
fn replica_counts_beyond_the_kubelet_limit_are_refused_by_field() {
    for bad in ["4294967295", "1000000", "262145", "9223372036854775807"] {
        let err = parse_text(&fuse_with(&format!("replicas = {bad}\n")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("/cfg/r.toml"), "{bad}: {err}");
        assert!(err.contains("nodes[0].replicas"), "{bad}: {err}");
        assert!(err.contains("262144"), "{bad}: {err}");
    }
    for bad in ["0", "-1"] {
        let err = parse_text(&fuse_with(&format!("replicas = {bad}\n")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nodes[0].replicas"), "{bad}: {err}");
        assert!(err.contains("at least 1"), "{bad}: {err}");
    }
    let r = parse_text(&fuse_with(&format!(
        "replicas = {MAX_DEVICES_PER_RESOURCE}\n"
    )))
    .unwrap();
    assert_eq!(r.replicas[&0] as usize, MAX_DEVICES_PER_RESOURCE);
}

#[test]
fn socket_names_that_can_never_be_bound_are_refused() {
    let long = "s".repeat(crate::limits::MAX_SOCKET_PATH_BYTES + 1);
    for bad in [
        long.as_str(),
        "a\\u0000b.sock",
        "tab\\tname.sock",
        "kubelet.sock",
        "a/b.sock",
        ".hidden.sock",
        "",
    ] {
        let text = fuse_with("").replace("[[nodes]]", &format!("socket = \"{bad}\"\n[[nodes]]"));
        let err = parse_text(&text).unwrap_err().to_string();
        assert!(err.contains("field `socket`"), "{bad:?}: {err}");
    }
}

#[test]
fn a_too_long_default_socket_name_is_refused() {
    // A valid resource name whose derived socket name is too long.
    let domain = format!("{}.{}", "a".repeat(63), "b".repeat(63));
    let text =
        format!("version = 1\nresource = \"{domain}/fuse\"\n[[nodes]]\npath = \"/dev/fuse\"\n");
    let err = parse_text(&text).unwrap_err().to_string();
    assert!(err.contains("field `socket`"), "{err}");
    assert!(err.contains("default socket name"), "{err}");
    let text = text.replace("[[nodes]]", "socket = \"short.sock\"\n[[nodes]]");
    assert_eq!(parse_text(&text).unwrap().socket, "short.sock");
}

#[test]
fn socket_paths_too_long_for_the_plugin_dir_are_refused_at_run_time() {
    let r = parse_text(&fuse_with("")).unwrap();
    let ok = socket_path(&r, Path::new("/var/lib/kubelet/device-plugins")).unwrap();
    assert_eq!(
        ok,
        Path::new("/var/lib/kubelet/device-plugins/wdp-example.com-fuse.sock")
    );
    let deep = PathBuf::from(format!("/{}", "d".repeat(90)));
    let err = socket_path(&r, &deep).unwrap_err().to_string();
    assert!(err.contains("/cfg/r.toml"), "{err}");
    assert!(err.contains("field `socket`"), "{err}");
    assert!(err.contains("107"), "{err}");
}

#[test]
fn reserved_and_malformed_resource_names_are_refused() {
    for bad in [
        "fuse",
        "kubernetes.io/fuse",
        "Example.com/fuse",
        "example.com/",
        "example.com/-x",
    ] {
        let err = parse_text(&format!(
            "version = 1\nresource = \"{bad}\"\n[[nodes]]\npath = \"/dev/fuse\"\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(err.contains("field `resource`"), "{bad}: {err}");
    }
    assert!(validate_resource_name("nvidia.com/gpu").is_ok());
}

#[test]
fn wrong_version_and_relative_paths_are_refused() {
    let err =
        parse_text("version = 2\nresource = \"example.com/a\"\n[[nodes]]\npath = \"/dev/fuse\"\n")
            .unwrap_err();
    assert!(err.to_string().contains("field `version`"), "{err}");
    let err =
        parse_text("version = 1\nresource = \"example.com/a\"\n[[nodes]]\npath = \"dev/fuse\"\n")
            .unwrap_err();
    assert!(err.to_string().contains("nodes[0].path"), "{err}");
}

#[test]
fn hooks_resolve_against_defaults_and_enable_pre_start() {
    let r = parse_text(
        "version = 1\nresource = \"example.com/a\"\n[[nodes]]\npath = \"/dev/fuse\"\n[hooks.pre-start]\nguest = \"guests/p.wasm\"\ntimeout-ms = 20\n[guest-config]\nmode = \"strict\"\nlimit = 3\n",
    )
    .unwrap();
    let b = r.hook(Hook::PreStart).unwrap();
    assert_eq!(b.guest, Path::new("/cfg/guests/p.wasm"));
    assert_eq!(b.timeout, Duration::from_millis(20));
    assert_eq!(b.memory_limit_bytes, 64 << 20);
    assert!(r.pre_start_required);
    assert_eq!(
        r.guest_config,
        vec![
            ("limit".into(), "3".into()),
            ("mode".into(), "strict".into())
        ]
    );
}

#[test]
fn a_passthrough_guest_needs_a_dra_resource_that_binds() {
    const DRA_PCI: &str = "version = 1\nresource = \"example.com/vfio\"\napi = \"dra\"\ndriver = \"vfio.example.com\"\n[[pci]]\nvendor = \"10de\"\n";
    const HOOK: &str = "[hooks.passthrough]\nguest = \"vfio-guard.wasm\"\n";
    let bound = parse_text(&format!(
        "{DRA_PCI}[passthrough]\nbind-driver = \"vfio-pci\"\n{HOOK}"
    ))
    .unwrap();
    let binding = bound.hook(Hook::Passthrough).unwrap();
    assert_eq!(binding.guest, PathBuf::from("/cfg/vfio-guard.wasm"));

    let error = parse_text(&format!("{DRA_PCI}{HOOK}"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`hooks.passthrough`") && error.contains("[passthrough]"),
        "{error}"
    );
    let error = parse_text(&fuse_with(HOOK)).unwrap_err().to_string();
    assert!(
        error.contains("`hooks.passthrough`") && error.contains("api = \"dra\""),
        "{error}"
    );
}
