use super::*;

#[test]
fn world_exports_the_hooks() {
    let wit = world_wit(&[Hook::Health, Hook::Allocate]);
    assert!(wit.contains("export wasm-device-plugin:policy/health@0.1.3;"));
    assert!(wit.contains("export wasm-device-plugin:policy/allocate@0.1.3;"));
    assert!(wit.contains("import wasm-device-plugin:policy/claim@0.1.3;"));
    assert!(!world_wit(&[Hook::Health]).contains("claim"));
}
