//! A recorded snapshot discovers exactly like the tree it was taken from.

use wdp_hardware::{HostRoot, PciSelector, Selector, UsbSelector, discover, record};

use crate::common::fixture_root as fixture;

fn round_trip(root: &HostRoot, selectors: &[Selector]) {
    let original = discover(root, selectors).unwrap();
    assert!(!original.candidates.is_empty());
    let dest = tempfile::tempdir().unwrap();
    let summary = record(root, &original.candidates, dest.path()).unwrap();
    assert!(summary.files > 0 && summary.links > 0);
    let replay = discover(&HostRoot::new(dest.path()), selectors).unwrap();
    assert_eq!(replay.candidates, original.candidates);
}

#[test]
fn gpu_server_snapshot_discovers_the_same_gpus() {
    round_trip(
        &fixture("gpu-server"),
        &[Selector::Pci(PciSelector {
            vendor: Some("10de".into()),
            ..Default::default()
        })],
    );
}

#[test]
fn sriov_and_usb_snapshots_discover_the_same_devices() {
    round_trip(
        &fixture("sriov-nic"),
        &[Selector::Pci(PciSelector::default())],
    );
    round_trip(&fixture("usb"), &[Selector::Usb(UsbSelector::default())]);
}
