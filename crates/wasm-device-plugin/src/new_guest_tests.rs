use super::*;

#[test]
fn names_are_valid_package_names() {
    for (dir, name) in [
        ("my-guest", "my-guest"),
        ("/tmp/x/My_Guest.v2", "my-guest-v2"),
        ("--x--", "x"),
        ("42", "guest-42"),
        ("", "guest"),
        ("test", "test-guest"),
        ("host", "host-guest"),
        ("ünïcode", "n-code"),
    ] {
        assert_eq!(guest_name(Path::new(dir)), name, "{dir:?}");
    }
    assert_eq!(guest_name(Path::new(&"a".repeat(80))).len(), 40);
}
