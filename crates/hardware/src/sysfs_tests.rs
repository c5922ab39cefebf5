use super::*;

#[test]
fn hex() {
    assert_eq!(parse_hex("0x10de\n"), Some(0x10de));
    assert_eq!(parse_hex("10DE"), Some(0x10de));
    assert_eq!(parse_hex("0X030200"), Some(0x030200));
    assert_eq!(parse_hex("0x"), None);
    assert_eq!(parse_hex("zz"), None);
    assert_eq!(parse_hex("-1"), None);
    assert_eq!(parse_hex("123456789"), None);
}

#[test]
fn uevent() {
    let c = "MAJOR=226\nMINOR=128\nDEVNAME=dri/renderD128\nDEVTYPE=drm_minor\n";
    assert_eq!(uevent_value(c, "DEVNAME"), Some("dri/renderD128"));
    assert_eq!(uevent_value(c, "MINOR"), Some("128"));
    assert_eq!(uevent_value(c, "NOPE"), None);
}

#[test]
fn cpulist() {
    assert_eq!(
        parse_cpulist("0-3,8,10-11\n"),
        Some(vec![0, 1, 2, 3, 8, 10, 11])
    );
    assert_eq!(parse_cpulist(""), Some(vec![]));
    assert_eq!(parse_cpulist("3-1"), None);
    assert_eq!(parse_cpulist("x"), None);
}
