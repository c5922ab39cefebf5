use super::*;

#[test]
fn reads_like_a_sorted_map() {
    let attributes: Attributes = [("pci.vendor", "0x10de"), ("pci.class", "0x030200")]
        .into_iter()
        .collect();
    assert_eq!(attributes.get("pci.vendor"), Some("0x10de"));
    assert_eq!(&attributes["pci.class"], "0x030200");
    assert_eq!(attributes.get("pci.device"), None);
    assert!(attributes.contains_key("pci.class"));
    assert_eq!(
        attributes.keys().collect::<Vec<_>>(),
        ["pci.class", "pci.vendor"]
    );
    assert_eq!(attributes.len(), 2);
    assert!(Attributes::default().is_empty());
    assert_eq!(
        format!("{attributes:?}"),
        r#"{"pci.class": "0x030200", "pci.vendor": "0x10de"}"#
    );
    assert_eq!(
        serde_json::to_string(&attributes).unwrap(),
        r#"{"pci.class":"0x030200","pci.vendor":"0x10de"}"#
    );
}

#[test]
fn a_repeated_key_keeps_the_last_value_and_keys_are_shared() {
    let one: Attributes = [("k", "1"), ("k", "2")].into_iter().collect();
    assert_eq!(one.len(), 1);
    assert_eq!(one.get("k"), Some("2"));
    let two: Attributes = [("k", "3")].into_iter().collect();
    assert!(Arc::ptr_eq(&one.pairs[0].0, &two.pairs[0].0));
    let map = BTreeMap::from([("k".to_owned(), "2".to_owned())]);
    assert_eq!(Attributes::from(map), one);
}
