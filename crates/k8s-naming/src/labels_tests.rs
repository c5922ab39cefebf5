//! Unit tests of the label name and value rules.

use super::*;

#[test]
fn label_names_take_an_optional_dns_subdomain_prefix() {
    for good in ["gpu", "example.com/gpu", "a.b/C_d-e.f", &"a".repeat(63)] {
        assert_eq!(label_name_problem(good), None, "{good}");
    }
    for (bad, why) in [
        ("", "empty"),
        ("example.com/", "empty"),
        ("Example.com/gpu", "prefix"),
        ("-gpu", "starting and ending"),
        ("gpu value", "only letters"),
        (&"a".repeat(64), "more than 63"),
    ] {
        let problem = label_name_problem(bad).unwrap_or_default();
        assert!(problem.contains(why), "{bad:?}: {problem}");
    }
}

#[test]
fn label_values_may_be_empty() {
    assert_eq!(label_value_problem(""), None);
    assert_eq!(label_value_problem("ok.Value_1"), None);
    assert!(label_value_problem("bad value").is_some());
    assert!(label_value_problem("a/b").is_some());
    assert!(label_value_problem(&"v".repeat(64)).is_some());
}
