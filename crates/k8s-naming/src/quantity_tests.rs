//! Unit tests of quantity parsing.

use super::*;

fn nanos(text: &str) -> i128 {
    Quantity::parse(text)
        .unwrap_or_else(|error| panic!("{text}: {error}"))
        .0
}

#[test]
fn suffixes_scale_as_the_api_defines_them() {
    assert_eq!(nanos("1"), 1_000_000_000);
    assert_eq!(nanos("1Ki"), 1024 * 1_000_000_000);
    assert_eq!(nanos("40Gi"), 40 * (1 << 30) * 1_000_000_000);
    assert_eq!(nanos("1Ei"), (1_i128 << 60) * 1_000_000_000);
    assert_eq!(nanos("500m"), 500_000_000);
    assert_eq!(nanos("3n"), 3);
    assert_eq!(nanos("7u"), 7_000);
    assert_eq!(nanos("2k"), 2_000 * 1_000_000_000);
    assert_eq!(nanos("1E"), 1_000_000_000_000_000_000 * 1_000_000_000);
    assert_eq!(nanos("1e3"), 1_000 * 1_000_000_000);
    assert_eq!(nanos("1E3"), 1_000 * 1_000_000_000);
    assert_eq!(nanos("15e-1"), 1_500_000_000);
    assert_eq!(nanos("1.5Gi"), 3 * (1 << 29) * 1_000_000_000);
    assert_eq!(nanos(".5"), 500_000_000);
    assert_eq!(nanos("5."), 5_000_000_000);
    assert_eq!(nanos("+4"), 4_000_000_000);
    assert_eq!(nanos("-4"), -4_000_000_000);
    assert_eq!(nanos("0"), 0);
}

#[test]
fn precision_below_a_nano_unit_rounds_up() {
    assert_eq!(nanos("0.1n"), 1);
    assert_eq!(nanos("1.0000000001"), 1_000_000_001);
}

#[test]
fn equal_amounts_compare_equal_whatever_the_spelling() {
    assert_eq!(Quantity::parse("1Gi"), Quantity::parse("1024Mi"));
    assert_eq!(Quantity::parse("1k"), Quantity::parse("1000"));
    assert!(Quantity::parse("1Gi").unwrap() > Quantity::parse("1G").unwrap());
}

#[test]
fn anything_else_is_refused_with_the_reason() {
    assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
    for text in ["Gi", "-", ".", "+Ki"] {
        assert!(
            matches!(Quantity::parse(text), Err(QuantityError::NoNumber(_))),
            "{text}"
        );
    }
    for text in [
        "1GB", "1 Gi", "1gi", "1.2.3", "1e", "1e1.5", "1Kii", "0x10", "1e+",
    ] {
        assert!(
            matches!(Quantity::parse(text), Err(QuantityError::BadSuffix { .. })),
            "{text}: {:?}",
            Quantity::parse(text)
        );
    }
    assert!(matches!(
        Quantity::parse("1e40"),
        Err(QuantityError::TooLarge(_))
    ));
    assert!(matches!(
        Quantity::parse("99999999999999999999999999999999999999999"),
        Err(QuantityError::TooLarge(_))
    ));
}

#[test]
fn display_is_in_whole_units() {
    assert_eq!(Quantity::parse("1500m").unwrap().to_string(), "1.5");
    assert_eq!(Quantity::parse("2Ki").unwrap().to_string(), "2048");
    assert_eq!(Quantity::parse("-250m").unwrap().to_string(), "-0.25");
}

#[test]
fn steps_are_counted_from_the_base() {
    let q = |text| Quantity::parse(text).unwrap();
    assert!(q("10Gi").is_step_from(q("2Gi"), q("2Gi")));
    assert!(!q("3Gi").is_step_from(q("2Gi"), q("2Gi")));
    assert!(!q("3Gi").is_step_from(q("2Gi"), Quantity::ZERO));
}
