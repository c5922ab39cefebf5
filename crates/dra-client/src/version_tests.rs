//! Unit tests of reading the server's version.

use super::*;

fn info(major: &str, minor: &str, git_version: &str) -> Info {
    Info {
        major: major.into(),
        minor: minor.into(),
        git_version: git_version.into(),
        ..Info::default()
    }
}

#[test]
fn versions_are_read_with_vendor_suffixes_and_from_git_version() {
    assert_eq!(
        ServerVersion::from_info(&info("1", "34", "v1.34.1")),
        Some(ServerVersion::V1_34)
    );
    assert_eq!(
        ServerVersion::from_info(&info("1", "35+", "v1.35.0-gke.1")),
        Some(ServerVersion::V1_35)
    );
    assert_eq!(
        ServerVersion::from_info(&info("", "", "v1.36.2-eks-1")),
        Some(ServerVersion {
            major: 1,
            minor: 36
        })
    );
    assert_eq!(ServerVersion::from_info(&info("", "", "unknown")), None);
}

#[test]
fn counter_sets_stand_alone_from_1_35() {
    assert!(!ServerVersion::V1_34.separates_counter_sets());
    assert!(ServerVersion::V1_35.separates_counter_sets());
    assert!(
        ServerVersion {
            major: 1,
            minor: 40
        }
        .separates_counter_sets()
    );
    assert_eq!(ServerVersion::V1_34.limits().max_taints_per_device, 4);
    assert_eq!(ServerVersion::V1_35.limits().device_limit(false, true), 64);
    assert_eq!(ServerVersion::V1_34.limits().device_limit(false, true), 128);
    assert_eq!(ServerVersion::V1_34.to_string(), "1.34");
}
