use super::*;

#[test]
fn dns_labels() {
    assert!(dns_label_problem("gpu-0").is_none());
    assert!(dns_label_problem("Gpu").is_some());
    assert!(dns_label_problem("-a").is_some());
    assert!(dns_label_problem("a.b").is_some());
    assert!(dns_label_problem(&"a".repeat(64)).is_some());
}

#[test]
fn dns_subdomains() {
    assert!(dns_subdomain_problem("gpu.example.com").is_none());
    assert!(dns_subdomain_problem("gpu..example").is_some());
    assert!(dns_subdomain_problem("").is_some());
}

#[test]
fn qualified_names_and_label_values() {
    assert!(qualified_name_problem("example.com/Key_1").is_none());
    assert!(qualified_name_problem("/key").is_some());
    assert!(qualified_name_problem("Example.com/key").is_some());
    assert!(qualified_name_problem("a/b/c").is_some());
    assert!(label_value_problem("").is_none());
    assert!(label_value_problem("ok.Value_1").is_none());
    assert!(label_value_problem("bad value").is_some());
}

#[test]
fn c_identifiers() {
    assert!(c_identifier_problem("model_name").is_none());
    assert!(c_identifier_problem("9lives").is_some());
    assert!(c_identifier_problem("has-dash").is_some());
}

#[test]
fn semver() {
    for good in [
        "1.2.3",
        "0.0.0",
        "1.0.0-rc.1",
        "1.0.0-alpha-1+build.5",
        "10.20.30+meta",
    ] {
        assert!(is_semver(good), "{good}");
    }
    for bad in [
        "1.2",
        "01.2.3",
        "1.2.3-",
        "1.2.3-01",
        "v1.2.3",
        "1.2.3+",
        "1.2.3-a..b",
    ] {
        assert!(!is_semver(bad), "{bad}");
    }
}
