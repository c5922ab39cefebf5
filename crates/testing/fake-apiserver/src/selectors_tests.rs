use super::*;

#[test]
fn field_selector_terms_all_apply() {
    let sel = FieldSelector::parse(
        "spec.nodeName=a,spec.driver!=x",
        &["spec.nodeName", "spec.driver"],
    )
    .unwrap();
    let values = |node: &'static str, driver: &'static str| {
        move |k: &str| {
            if k == "spec.nodeName" {
                node.into()
            } else {
                driver.into()
            }
        }
    };
    assert!(sel.matches(values("a", "y")));
    assert!(!sel.matches(values("a", "x")));
    assert!(!sel.matches(values("b", "y")));
}

#[test]
fn field_selector_rejects_unindexed_fields() {
    let err = FieldSelector::parse("spec.pool.name=p", &["spec.nodeName"]).unwrap_err();
    assert_eq!(err.message, "field label not supported: spec.pool.name");
}

#[test]
fn label_selector_forms() {
    let labels: BTreeMap<String, String> = [("app".to_string(), "gpu".to_string())]
        .into_iter()
        .collect();
    let check = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&labels));
    assert!(check("app=gpu"));
    assert!(check("app in (cpu, gpu),!tier"));
    assert!(!check("app notin (gpu)"));
    assert!(!check("tier"));
    assert!(check("app!=cpu"));
    assert!(LabelSelector::parse("a b").is_err());
}
