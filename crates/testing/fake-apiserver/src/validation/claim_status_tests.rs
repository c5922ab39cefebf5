use super::*;

#[test]
fn interface_addresses() {
    assert_eq!(interface_address_problem("10.9.8.7/24"), None);
    assert_eq!(interface_address_problem("2001:db8::1/64"), None);
    assert!(interface_address_problem("10.9.8.7").is_some());
    assert!(interface_address_problem("10.9.8.7/33").is_some());
    assert!(
        interface_address_problem("2001:DB8::1/64")
            .unwrap()
            .contains("canonical")
    );
    assert!(
        interface_address_problem("2001:db8:0::1/64")
            .unwrap()
            .contains("canonical")
    );
}

#[test]
fn condition_reasons() {
    assert!(is_condition_reason("Ready"));
    assert!(is_condition_reason("A,B:c_"));
    assert!(!is_condition_reason("1Ready"));
    assert!(!is_condition_reason("Ready,"));
    assert!(!is_condition_reason("not ready"));
}
