use super::*;

#[test]
fn names() {
    assert_eq!(normal_name("reset"), Ok("reset".into()));
    assert_eq!(
        normal_name("./drm//renderD128/dev"),
        Ok("drm/renderD128/dev".into())
    );
    assert!(normal_name("../vendor").is_err());
    assert!(normal_name("drm/../vendor").is_err());
    assert!(normal_name("/etc/passwd").is_err());
    assert!(normal_name("").is_err());
    assert!(normal_name(".").is_err());
    assert!(normal_name("a\0b").is_err());
}
