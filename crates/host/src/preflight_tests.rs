use super::*;

#[test]
fn a_writable_plugin_dir_passes_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    check_plugin_dir(tmp.path()).unwrap();
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[test]
fn a_missing_plugin_dir_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("device-plugins");
    let error = check_plugin_dir(&missing).unwrap_err().to_string();
    assert!(error.contains(&*missing.to_string_lossy()), "{error}");
}

#[test]
fn a_file_in_place_of_the_plugin_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("device-plugins");
    std::fs::write(&file, b"").unwrap();
    let error = check_plugin_dir(&file).unwrap_err().to_string();
    assert!(error.contains("not a directory"), "{error}");
}

/// A directory whose permission bits forbid writing: the check answers
/// what binding a socket there does (refused for an unprivileged user;
/// allowed as root, whose `CAP_DAC_OVERRIDE` ignores the bits).
#[test]
fn the_check_agrees_with_binding_a_socket_in_a_read_only_permission_dir() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("device-plugins");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).unwrap();
    let checked = check_plugin_dir(&dir);
    let bound = std::os::unix::net::UnixListener::bind(dir.join("probe.sock"));
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(checked.is_ok(), bound.is_ok(), "{checked:?} / {bound:?}");
    if let Err(error) = checked {
        assert!(
            error.to_string().contains(&*dir.to_string_lossy()),
            "{error}"
        );
    }
}
