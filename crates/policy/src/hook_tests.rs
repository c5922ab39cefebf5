use super::*;

#[test]
fn display_round_trips() {
    for hook in Hook::ALL {
        assert_eq!(hook.to_string().parse::<Hook>(), Ok(hook));
    }
    assert_eq!(
        Hook::PreferredAllocation.to_string(),
        "preferred-allocation"
    );
    assert!("preferred_allocation".parse::<Hook>().is_err());
    assert_eq!("dra-layout".parse::<Hook>(), Ok(Hook::DraLayout));
    assert_eq!(Hook::DeviceTaints.function(), "taints");
    assert_eq!("device-taints-v2".parse::<Hook>(), Ok(Hook::DeviceTaintsV2));
    assert_eq!(Hook::DeviceTaintsV2.function(), "taints");
    assert_eq!("passthrough".parse::<Hook>(), Ok(Hook::Passthrough));
    assert_eq!(Hook::Passthrough.function(), "may-bind");
    let unknown = "dra".parse::<Hook>().unwrap_err().to_string();
    assert!(
        unknown.ends_with("device-taints, device-taints-v2, passthrough)"),
        "{unknown}"
    );
}
