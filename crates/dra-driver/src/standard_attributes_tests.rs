use super::*;

fn device(numa: &[i64], facts: &[(&str, &str)]) -> wit::DeviceRef {
    wit::DeviceRef {
        numa_nodes: numa.to_vec(),
        attributes: facts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..wit::DeviceRef::default()
    }
}

#[test]
fn a_gpu_behind_pcie_switches_gets_its_root_bus_id_and_numa_node() {
    // An HGX board: the GPU four bridges below its root complex, a
    // path too long for a DRA string attribute of its own.
    let path = "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
    assert!(path.len() > 64);
    let gpu = device(&[1], &[("pci.address", "0000:18:00.0"), ("pci.path", path)]);
    assert_eq!(
        standard_attributes(&gpu),
        [
            (NUMA_NODE, AttributeValue::Int(1)),
            (PCIE_ROOT, AttributeValue::String("pci0000:15".into())),
            (PCI_BUS_ID, AttributeValue::String("0000:18:00.0".into())),
        ]
    );
}

#[test]
fn roots_are_found_below_other_parents_and_only_in_the_kernels_form() {
    assert_eq!(
        pcie_root("/sys/devices/LNXSYSTM:00/LNXSYBUS:00/pci7870:00/7870:00:00.0"),
        Some("pci7870:00")
    );
    assert_eq!(
        pcie_root("/sys/devices/pci0000:00/0000:00:06.0"),
        Some("pci0000:00")
    );
    for path in [
        "/sys/devices/platform/soc/usb1",
        "/sys/devices/pci0000:0/0000:00:06.0",
        "/sys/devices/pciX000:00/x",
        "/sys/devices/pci0000:00:01/x",
        "",
    ] {
        assert_eq!(pcie_root(path), None, "{path}");
    }
}

#[test]
fn only_addresses_in_extended_bdf_form_become_bus_ids() {
    assert!(is_pci_address("0000:3b:00.0"));
    for address in [
        "10000:00:1f.7",
        "3b:00.0",
        "0000:3b:00.8",
        "0000:3B:00.0",
        "0000:3b:00",
        "nvidia0",
    ] {
        assert!(!is_pci_address(address), "{address}");
    }
    let usb = device(
        &[0, 1],
        &[
            ("pci.address", "1-1.2"),
            (
                "usb.path",
                "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2",
            ),
        ],
    );
    assert_eq!(standard_attributes(&usb), []);
}
