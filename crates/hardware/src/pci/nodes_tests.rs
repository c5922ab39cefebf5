use super::*;

#[test]
fn nvidia_uuid_from_information() {
    let text = "Model: \t\t NVIDIA H100 80GB HBM3\nGPU UUID: \t GPU-be34234d-8860-3341-740e-a6cf83a7133f\nDevice Minor: \t 0\n";
    assert_eq!(
        nvidia_uuid(text).as_deref(),
        Some("GPU-be34234d-8860-3341-740e-a6cf83a7133f")
    );
    assert_eq!(nvidia_uuid("Device Minor: 0\n"), None);
    assert_eq!(nvidia_uuid("GPU UUID: \t ??\n"), None);
}
