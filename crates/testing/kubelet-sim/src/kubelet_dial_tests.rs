use super::*;

#[test]
fn authority_is_the_percent_encoded_path() {
    assert_eq!(
        grpc_go_authority(Path::new("/var/lib/kubelet/plugins_registry/x.sock")),
        "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx.sock"
    );
}
