use super::*;

#[test]
fn socket_names() {
    assert_eq!(registration_socket_name("gpu.sock"), "gpu-reg.sock");
    assert_eq!(registration_socket_name(".hidden.sock"), "hidden-reg.sock");
    assert_eq!(registration_socket_name("plain"), "plain-reg.sock");
}

#[test]
fn auto_follows_the_folder() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(
        RegistrationMode::Auto.resolve(tmp.path()),
        RegistrationPath::PluginWatcher
    );
    assert_eq!(
        RegistrationMode::Auto.resolve(&tmp.path().join("missing")),
        RegistrationPath::Kubelet
    );
    assert_eq!(
        RegistrationMode::PluginWatcher.resolve(&tmp.path().join("missing")),
        RegistrationPath::PluginWatcher
    );
}
