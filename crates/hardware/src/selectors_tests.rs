use super::*;

/// Facts known up front.
struct Known {
    address: &'static str,
    vendor: u32,
    device: Option<u32>,
    class: Option<u32>,
    subsystem_vendor: Option<u32>,
    subsystem_device: Option<u32>,
    driver: Option<&'static str>,
}

impl PciFacts for Known {
    fn address(&self) -> &str {
        self.address
    }
    fn vendor(&self) -> u32 {
        self.vendor
    }
    fn device(&mut self) -> Option<u32> {
        self.device
    }
    fn class(&mut self) -> Option<u32> {
        self.class
    }
    fn subsystem_vendor(&mut self) -> Option<u32> {
        self.subsystem_vendor
    }
    fn subsystem_device(&mut self) -> Option<u32> {
        self.subsystem_device
    }
    fn driver(&mut self) -> Option<&str> {
        self.driver
    }
}

fn gpu() -> Known {
    Known {
        address: "0000:3b:00.0",
        vendor: 0x10de,
        device: Some(0x2330),
        class: Some(0x030200),
        subsystem_vendor: Some(0x10de),
        subsystem_device: Some(0x16c1),
        driver: Some("nvidia"),
    }
}

fn pci(f: impl FnOnce(&mut PciSelector)) -> Result<CompiledPci, HardwareError> {
    let mut s = PciSelector::default();
    f(&mut s);
    CompiledPci::new(&s)
}

#[test]
fn pci_matching() {
    let yes = |f: fn(&mut PciSelector)| assert!(pci(f).unwrap().matches(&mut gpu()));
    let no = |f: fn(&mut PciSelector)| assert!(!pci(f).unwrap().matches(&mut gpu()));
    yes(|_| {});
    yes(|s| s.vendor = Some("10DE".into()));
    yes(|s| s.vendor = Some("0x10de".into()));
    no(|s| s.vendor = Some("0x8086".into()));
    yes(|s| s.class = Some("0x03".into()));
    yes(|s| s.class = Some("0302".into()));
    yes(|s| s.class = Some("0x030200".into()));
    no(|s| s.class = Some("0x0300".into()));
    no(|s| s.class = Some("0x030000".into()));
    yes(|s| s.driver = Some("nvidia".into()));
    no(|s| s.driver = Some("nouveau".into()));
    yes(|s| s.address = Some("0000:3b:*".into()));
    yes(|s| s.address = Some("3B:00.?".into()));
    no(|s| s.address = Some("0001:3b:*".into()));
    yes(|s| s.subsystem_device = Some("16c1".into()));
    no(|s| s.subsystem_vendor = Some("1028".into()));
    yes(|s| {
        s.vendor = Some("10de".into());
        s.device = Some("2330".into());
    });
    no(|s| {
        s.vendor = Some("10de".into());
        s.device = Some("2331".into());
    });
}

#[test]
fn bad_pci_values_name_the_field() {
    let err = pci(|s| s.vendor = Some("nvidia".into())).unwrap_err();
    assert!(err.to_string().contains("`vendor`") && err.to_string().contains("nvidia"));
    let err = pci(|s| s.class = Some("0x3020".into())).map(drop);
    assert!(err.is_ok(), "4 digits is a class+subclass prefix");
    let err = pci(|s| s.class = Some("0x30200".into())).unwrap_err();
    assert!(err.to_string().contains("`class`"), "{err}");
    let err = pci(|s| s.device = Some("0x123456".into())).unwrap_err();
    assert!(err.to_string().contains("`device`"), "{err}");
    let err = pci(|s| s.address = Some("0000:[3b".into())).unwrap_err();
    assert!(err.to_string().contains("`address`"), "{err}");
}

#[test]
fn usb_matching() {
    let id = UsbIdentity {
        vendor: 0x0403,
        product: Some(0x6001),
        serial: Some("A50285BI"),
    };
    let s = |v: Option<&str>, p: Option<&str>, ser: Option<&str>| {
        CompiledUsb::new(&UsbSelector {
            vendor: v.map(Into::into),
            product: p.map(Into::into),
            serial: ser.map(Into::into),
        })
        .unwrap()
    };
    assert!(s(Some("0403"), None, None).matches(&id));
    assert!(s(Some("0x0403"), Some("6001"), Some("A50285BI")).matches(&id));
    assert!(!s(Some("0403"), Some("6010"), None).matches(&id));
    assert!(!s(None, None, Some("a50285bi")).matches(&id));
    assert!(
        CompiledUsb::new(&UsbSelector {
            vendor: Some("xyz".into()),
            ..Default::default()
        })
        .is_err()
    );
}

#[test]
fn node_ids() {
    assert_eq!(node_id(Path::new("/dev/net/tun")), "net-tun");
    assert_eq!(node_id(Path::new("/dev/fuse")), "fuse");
    assert_eq!(node_id(Path::new("/run/x/y")), "run-x-y");
}

#[test]
fn toml_shapes() {
    #[derive(serde::Deserialize)]
    struct Doc {
        select: Vec<Selector>,
    }
    let doc: Doc = toml::from_str(
        r#"
            [[select]]
            pci = { vendor = "10de", class = "0x0302", subsystem-vendor = "10de" }
            [[select]]
            usb = { vendor = "0403", serial = "X" }
            [[select]]
            nodes = { path = "/dev/fuse", optional = true }
            "#,
    )
    .unwrap();
    assert_eq!(doc.select.len(), 3);
    assert!(
        matches!(&doc.select[0], Selector::Pci(p) if p.subsystem_vendor.as_deref() == Some("10de"))
    );
    assert!(matches!(&doc.select[2], Selector::Nodes(n) if n.optional));
    for s in &doc.select {
        s.validate().unwrap();
    }
    let err = toml::from_str::<Doc>("[[select]]\npci = { vendr = \"10de\" }\n")
        .err()
        .unwrap();
    assert!(err.to_string().contains("vendr"), "{err}");
    let err = toml::from_str::<Doc>("[[select]]\ngpu = { vendor = \"10de\" }\n")
        .err()
        .unwrap();
    assert!(err.to_string().contains("gpu"), "{err}");
}
