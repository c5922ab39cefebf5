use super::*;

fn q(text: &str) -> Quantity {
    Quantity::parse(text).unwrap()
}

#[test]
fn the_syntax_apimachinery_accepts() {
    for good in [
        "1", "0", "+1", "-1", "1.5", ".5", "5.", "500m", "1Gi", "1e3", "1E-3", "2k",
    ] {
        assert!(Quantity::parse(good).is_ok(), "{good}");
    }
    for bad in [
        "", "Gi", ".", "1..2", "1 Gi", "1x", "1e", "1K", "1Gib", "--1", "1e+",
    ] {
        assert!(Quantity::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn comparison_and_steps_are_exact() {
    assert_eq!(q("1Gi"), q("1024Mi"));
    assert_eq!(q("1k"), q("1e3"));
    assert_eq!(q("0.5"), q("500m"));
    assert!(q("1Gi") > q("1G"));
    assert!(q("-1") < q("0"));
    assert!(q("1") > q("999m"));
    assert_eq!(q("1Gi").checked_add(q("1Gi")), Some(q("2Gi")));
    assert_eq!(q("10Gi").is_step_from(q("2Gi"), q("1Gi")), Some(true));
    assert_eq!(q("2500m").is_step_from(q("1"), q("1")), Some(false));
    assert_eq!(q("1").is_step_from(q("0"), q("0")), None);
}
