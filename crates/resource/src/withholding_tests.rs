use std::collections::BTreeSet;

use super::*;

#[test]
fn an_empty_id_set_withholds_nothing() {
    let withholding = Withholding::some(BTreeSet::new(), "held");
    assert!(withholding.is_empty());
    assert!(!withholding.withholds("gpu0"));
}

#[test]
fn all_and_some_withhold_what_they_say() {
    let all = Withholding::all("unknown");
    assert!(all.withholds("gpu0") && all.withholds("anything"));
    assert_eq!(all.count(8), 8);
    let some = Withholding::some(["gpu1".to_owned()].into(), "held");
    assert!(some.withholds("gpu1"));
    assert!(!some.withholds("gpu0"));
    assert_eq!(some.count(8), 1);
}
