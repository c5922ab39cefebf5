use super::*;

#[test]
fn addresses() {
    assert!(is_pci_address("0000:3b:00.0"));
    assert!(is_pci_address("10000:00:1f.7"));
    assert!(!is_pci_address("0000:3b:00"));
    assert!(!is_pci_address("3b:00.0"));
    assert!(!is_pci_address("0000:3b:00.x"));
    assert!(!is_pci_address("0000:3b:00.0:1"));
    assert!(!is_pci_address(""));
}
