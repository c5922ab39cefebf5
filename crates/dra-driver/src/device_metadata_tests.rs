use super::*;
use std::collections::BTreeSet;

use std::collections::BTreeMap;

const DRIVER: &str = "gpu.example.com";

fn claim_identity(pod_claim_name: Option<&'static str>) -> ClaimIdentity<'static> {
    ClaimIdentity {
        namespace: "default",
        name: "my-claim",
        uid: "uid-1234",
        pod_claim_name,
    }
}

fn device(request: &str, name: &str, bus: &str) -> ClaimDeviceMetadata {
    ClaimDeviceMetadata {
        request: request.into(),
        pool: "worker-0".into(),
        name: name.into(),
        attributes: BTreeMap::from([
            (
                "resource.kubernetes.io/pciBusID".to_owned(),
                AttributeValue::String(bus.into()),
            ),
            (
                format!("{DRIVER}/model"),
                AttributeValue::String("A100".into()),
            ),
            (
                "resource.kubernetes.io/numaNode".to_owned(),
                AttributeValue::Int(1),
            ),
            (format!("{DRIVER}/sriov"), AttributeValue::Bool(true)),
            (
                format!("{DRIVER}/firmware"),
                AttributeValue::Version("1.2.3".into()),
            ),
        ]),
    }
}

/// The object as k8s.io/apimachinery's pretty JSON serializer writes the
/// upstream `DeviceMetadata` (field order of the Go types, map keys
/// sorted, two-space indent, empty fields left out).
fn upstream_object(api_version: &str) -> String {
    format!(
        r#"{{
  "kind": "DeviceMetadata",
  "apiVersion": "{api_version}",
  "metadata": {{
    "name": "my-claim",
    "namespace": "default",
    "uid": "uid-1234",
    "generation": 1
  }},
  "requests": [
    {{
      "name": "gpu",
      "devices": [
        {{
          "driver": "gpu.example.com",
          "pool": "worker-0",
          "name": "gpu-0",
          "attributes": {{
            "gpu.example.com/firmware": {{
              "version": "1.2.3"
            }},
            "gpu.example.com/model": {{
              "string": "A100"
            }},
            "gpu.example.com/sriov": {{
              "bool": true
            }},
            "resource.kubernetes.io/numaNode": {{
              "int": 1
            }},
            "resource.kubernetes.io/pciBusID": {{
              "string": "0000:03:00.0"
            }}
          }}
        }}
      ]
    }}
  ]
}}
"#
    )
}

#[test]
fn the_file_is_the_upstream_stream_newest_version_first() {
    let writer = MetadataWriter::new(PathBuf::from("/unused"), DRIVER);
    let gpu = device("gpu", "gpu-0", "0000:03:00.0");
    let bytes = writer.encode(claim_identity(None), "gpu", &[&gpu]);
    let expected = format!(
        "{}{}",
        upstream_object("metadata.resource.k8s.io/v1beta1"),
        upstream_object("metadata.resource.k8s.io/v1alpha1")
    );
    assert_eq!(String::from_utf8(bytes).unwrap(), expected);
}

/// The upstream types (api/metadata/v1beta1, identical in v1alpha1), field
/// for field as their JSON tags name them, strict: a field of ours under
/// another name fails the decode.
mod upstream {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct DeviceMetadata {
        #[serde(rename = "apiVersion")]
        pub api_version: String,
        pub kind: String,
        #[serde(default)]
        pub metadata: ObjectMeta,
        #[serde(rename = "podClaimName", default)]
        pub pod_claim_name: Option<String>,
        #[serde(default)]
        pub requests: Vec<DeviceMetadataRequest>,
    }

    #[derive(Debug, Default, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct ObjectMeta {
        #[serde(default)]
        pub name: String,
        #[serde(default)]
        pub namespace: String,
        #[serde(default)]
        pub uid: String,
        #[serde(default)]
        pub generation: i64,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct DeviceMetadataRequest {
        pub name: String,
        #[serde(default)]
        pub devices: Vec<Device>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Device {
        pub driver: String,
        pub pool: String,
        pub name: String,
        #[serde(default)]
        pub attributes: BTreeMap<String, DeviceAttribute>,
        #[serde(rename = "networkData", default)]
        pub network_data: Option<serde_json::Value>,
    }

    /// resource.k8s.io/v1 `DeviceAttribute`.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct DeviceAttribute {
        pub int: Option<i64>,
        pub bool: Option<bool>,
        pub string: Option<String>,
        pub version: Option<String>,
        pub ints: Option<Vec<i64>>,
        pub bools: Option<Vec<bool>>,
        pub strings: Option<Vec<String>>,
        pub versions: Option<Vec<String>>,
    }

    impl DeviceAttribute {
        pub fn values(&self) -> usize {
            usize::from(self.int.is_some())
                + usize::from(self.bool.is_some())
                + usize::from(self.string.is_some())
                + usize::from(self.version.is_some())
                + usize::from(self.ints.is_some())
                + usize::from(self.bools.is_some())
                + usize::from(self.strings.is_some())
                + usize::from(self.versions.is_some())
        }
    }
}

/// What `devicemetadata.DecodeMetadataFromStream` does with a stream: the
/// first object of a known version (v1alpha1, v1beta1 in 1.37) of group
/// `metadata.resource.k8s.io` and kind `DeviceMetadata` is decoded, objects
/// of unknown versions are skipped, anything else fails; then
/// `Validate_DeviceMetadata` (required fields, at most 32 attributes, one
/// value each, a driver name of at most 63 characters).
fn decode_as_upstream(bytes: &[u8], known: &[&str]) -> Result<upstream::DeviceMetadata, String> {
    let mut unknown = Vec::new();
    for value in serde_json::Deserializer::from_slice(bytes).into_iter::<serde_json::Value>() {
        let value = value.map_err(|e| format!("read metadata object from stream: {e}"))?;
        let api_version = value["apiVersion"]
            .as_str()
            .ok_or("decode metadata object: no apiVersion")?
            .to_owned();
        let (group, version) = api_version
            .split_once('/')
            .ok_or("decode metadata object: no group")?;
        if group != "metadata.resource.k8s.io" || value["kind"] != "DeviceMetadata" {
            return Err(format!("not a DeviceMetadata: {api_version}"));
        }
        if !known.contains(&version) {
            unknown.push(api_version.clone());
            continue;
        }
        let object: upstream::DeviceMetadata =
            serde_json::from_value(value).map_err(|e| format!("decode {api_version}: {e}"))?;
        for request in &object.requests {
            if request.name.is_empty() {
                return Err("requests[].name: Required value".into());
            }
            for device in &request.devices {
                if device.driver.is_empty() || device.pool.is_empty() || device.name.is_empty() {
                    return Err("devices[]: driver, pool and name are required".into());
                }
                if device.driver.len() > 63 {
                    return Err("devices[].driver: too long".into());
                }
                if device.attributes.len() > 32 {
                    return Err("devices[].attributes: at most 32".into());
                }
                if let Some((key, _)) = device.attributes.iter().find(|(_, a)| a.values() != 1) {
                    return Err(format!("attributes[{key}]: exactly one value is required"));
                }
            }
        }
        return Ok(object);
    }
    Err(format!(
        "no compatible metadata version found in stream (unknown versions: {})",
        unknown.join(", ")
    ))
}

#[test]
fn an_upstream_consumer_of_1_37_or_1_36_reads_the_file() {
    let writer = MetadataWriter::new(PathBuf::from("/unused"), DRIVER);
    let (a, b) = (
        device("gpu/large", "gpu-0", "0000:03:00.0"),
        device("gpu/large", "gpu-1", "0000:04:00.0"),
    );
    let bytes = writer.encode(claim_identity(Some("my-gpus")), "gpu/large", &[&a, &b]);
    // 1.37 knows both and takes the first (v1beta1); 1.36 knows only
    // v1alpha1 and skips v1beta1.
    for (known, version) in [
        (
            &["v1alpha1", "v1beta1"][..],
            "metadata.resource.k8s.io/v1beta1",
        ),
        (&["v1alpha1"][..], "metadata.resource.k8s.io/v1alpha1"),
    ] {
        let read = decode_as_upstream(&bytes, known).unwrap();
        assert_eq!(read.api_version, version);
        assert_eq!(read.kind, "DeviceMetadata");
        assert_eq!(read.metadata.name, "my-claim");
        assert_eq!(read.metadata.namespace, "default");
        assert_eq!(read.metadata.uid, "uid-1234");
        assert_eq!(read.metadata.generation, 1);
        assert_eq!(read.pod_claim_name.as_deref(), Some("my-gpus"));
        assert_eq!(read.requests.len(), 1);
        assert_eq!(
            read.requests[0].name, "gpu/large",
            "the request as allocated"
        );
        let devices = &read.requests[0].devices;
        assert_eq!(devices.len(), 2);
        assert_eq!(
            (
                devices[1].driver.as_str(),
                devices[1].pool.as_str(),
                devices[1].name.as_str()
            ),
            (DRIVER, "worker-0", "gpu-1")
        );
        let bus = &devices[1].attributes["resource.kubernetes.io/pciBusID"];
        assert_eq!(bus.string.as_deref(), Some("0000:04:00.0"));
        assert!(devices[1].network_data.is_none());
    }
    // A consumer that knows neither fails as upstream's does.
    let error = decode_as_upstream(&bytes, &["v1"]).unwrap_err();
    assert!(error.contains("metadata.resource.k8s.io/v1beta1, metadata.resource.k8s.io/v1alpha1"));
}

#[test]
fn container_paths_follow_the_upstream_layout() {
    assert_eq!(
        container_path(DRIVER, "my-claim", None, "gpu"),
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/my-claim/gpu/gpu.example.com-metadata.json"
    );
    assert_eq!(
        container_path(DRIVER, "pod-x-gpus-7fz", Some("gpus"), "gpu"),
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/gpu/gpu.example.com-metadata.json"
    );
    assert_eq!(base_request("gpu/large"), "gpu");
    assert_eq!(base_request("gpu"), "gpu");
    assert_eq!(
        metadata_root(Path::new("/var/lib/kubelet/plugins"), DRIVER),
        Path::new("/var/lib/kubelet/plugins/gpu.example.com/dra-device-metadata")
    );
}

#[test]
fn a_claims_files_are_written_per_request_readable_by_all_and_removed_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir
        .path()
        .join("plugins/gpu.example.com/dra-device-metadata");
    let writer = MetadataWriter::new(root.clone(), DRIVER);
    writer.check().unwrap();
    let devices = [
        device("gpu", "gpu-0", "0000:03:00.0"),
        device("nic/fast", "gpu-1", "0000:04:00.0"),
        device("gpu", "gpu-2", "0000:05:00.0"),
    ];
    let record = writer.write(claim_identity(None), &devices).unwrap();
    let claim_dir = root.join("default_my-claim");
    assert_eq!(record.dir, claim_dir);
    let files: Vec<(&str, &Path, &str)> = record
        .files
        .iter()
        .map(|f| {
            (
                f.request.as_str(),
                f.host_path.as_path(),
                f.cdi_device.as_str(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [
            (
                "gpu",
                claim_dir.join("gpu/metadata.json").as_path(),
                "uid-1234_metadata_gpu"
            ),
            (
                "nic",
                claim_dir.join("nic/metadata.json").as_path(),
                "uid-1234_metadata_nic"
            ),
        ]
    );
    let gpu = decode_as_upstream(
        &std::fs::read(&record.files[0].host_path).unwrap(),
        &["v1beta1"],
    )
    .unwrap();
    let names: Vec<&str> = gpu.requests[0]
        .devices
        .iter()
        .map(|d| d.name.as_str())
        .collect();
    assert_eq!(names, ["gpu-0", "gpu-2"]);
    let mode = std::fs::metadata(&record.files[1].host_path)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644, "a container's non-root user reads it");
    assert!(is_intact(&record, "uid-1234"));
    assert!(!is_intact(&record, "uid-other"));

    // The CDI devices mount each file read-only where the container looks.
    let cdi = cdi_devices(&record);
    assert_eq!(cdi[1].name, "uid-1234_metadata_nic");
    assert_eq!(
        cdi[1].container_edits.mounts,
        [CdiMount {
            host_path: claim_dir.join("nic/metadata.json").display().to_string(),
            container_path: "/var/run/kubernetes.io/dra-device-attributes/resourceclaims/my-claim/nic/gpu.example.com-metadata.json".into(),
            options: vec!["ro".into(), "bind".into()],
        }]
    );

    remove(&record, "uid-1234").unwrap();
    assert!(
        !claim_dir.exists(),
        "the claim's folder goes with its files"
    );
    assert!(root.exists(), "the root stays");
    // Removing again is not an error.
    remove(&record, "uid-1234").unwrap();
}

#[test]
fn a_file_a_new_claim_of_the_same_name_wrote_is_not_removed_with_the_old_claim() {
    let dir = tempfile::tempdir().unwrap();
    let writer = MetadataWriter::new(dir.path().to_owned(), DRIVER);
    let old = writer
        .write(
            claim_identity(None),
            &[device("gpu", "gpu-0", "0000:03:00.0")],
        )
        .unwrap();
    let new = ClaimIdentity {
        uid: "uid-new",
        ..claim_identity(None)
    };
    writer
        .write(new, &[device("gpu", "gpu-1", "0000:04:00.0")])
        .unwrap();
    remove(&old, "uid-1234").unwrap();
    assert!(old.files[0].host_path.exists());
    assert!(!remove_unrecorded(&old.dir, "uid-1234").unwrap());
    assert!(remove_unrecorded(&old.dir, "uid-new").unwrap());
    assert!(!old.dir.exists());
}

#[test]
fn a_damaged_folder_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dra-device-metadata");
    std::fs::write(&root, b"not a folder").unwrap();
    let writer = MetadataWriter::new(root.clone(), DRIVER);
    let error = writer.check().unwrap_err().to_string();
    assert!(error.contains(&root.display().to_string()), "{error}");
    let error = writer
        .write(
            claim_identity(None),
            &[device("gpu", "gpu-0", "0000:03:00.0")],
        )
        .unwrap_err()
        .to_string();
    assert!(error.contains("default_my-claim/gpu"), "{error}");
}

#[test]
fn the_mount_goes_with_the_first_device_of_each_request() {
    let prepared = |request: &str, name: &str| PreparedDevice {
        request_names: vec![request.into()],
        pool_name: "worker-0".into(),
        device_name: name.into(),
        device_id: name.into(),
        partition_of: None,
        consumed_capacity: Vec::new(),
        shared: false,
        cdi_device_ids: vec![format!("example.com/gpu=uid-1234-{name}")],
        share_id: None,
        admin_access: false,
        unknown: Map::new(),
    };
    let mut devices = vec![
        prepared("gpu", "gpu-0"),
        prepared("gpu", "gpu-1"),
        prepared("nic/fast", "gpu-2"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let record = MetadataWriter::new(dir.path().to_owned(), DRIVER)
        .write(
            claim_identity(None),
            &[
                device("gpu", "gpu-0", "0000:03:00.0"),
                device("gpu", "gpu-1", "0000:04:00.0"),
                device("nic/fast", "gpu-2", "0000:05:00.0"),
            ],
        )
        .unwrap();
    attach_cdi_ids(&mut devices, "example.com/gpu", &record);
    attach_cdi_ids(&mut devices, "example.com/gpu", &record);
    let ids: Vec<&[String]> = devices
        .iter()
        .map(|d| d.cdi_device_ids.as_slice())
        .collect();
    assert_eq!(
        ids,
        [
            &[
                "example.com/gpu=uid-1234-gpu-0".to_owned(),
                "example.com/gpu=uid-1234_metadata_gpu".to_owned()
            ][..],
            &["example.com/gpu=uid-1234-gpu-1".to_owned()][..],
            &[
                "example.com/gpu=uid-1234-gpu-2".to_owned(),
                "example.com/gpu=uid-1234_metadata_nic".to_owned()
            ][..],
        ]
    );
}

#[test]
fn a_record_round_trips_and_keeps_what_a_newer_host_added() {
    let text = r#"{"dir":"/p/default_c","pod_claim_name":"gpus","files":[{"request":"gpu","host_path":"/p/default_c/gpu/metadata.json","container_path":"/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpus/gpu/gpu.example.com-metadata.json","cdi_device":"u_metadata_gpu","future":1}],"later":true}"#;
    let record: MetadataRecord = serde_json::from_str(text).unwrap();
    assert_eq!(record.pod_claim_name.as_deref(), Some("gpus"));
    let again: serde_json::Value = serde_json::to_value(&record).unwrap();
    assert_eq!(
        again,
        serde_json::from_str::<serde_json::Value>(text).unwrap()
    );
}

#[test]
fn files_no_record_names_are_found_once_older_than_a_prepare_can_be() {
    let dir = tempfile::tempdir().unwrap();
    let writer = MetadataWriter::new(dir.path().to_owned(), DRIVER);
    let write = |name: &'static str, uid: &'static str| {
        let claim = ClaimIdentity {
            name,
            uid,
            ..claim_identity(None)
        };
        writer
            .write(claim, &[device("gpu", "gpu-0", "0000:03:00.0")])
            .unwrap()
    };
    let (recorded, orphan, young) = (
        write("recorded", "u1"),
        write("orphan", "u2"),
        write("young", "u3"),
    );
    let age = std::time::Duration::from_secs(300);
    let long_ago = std::time::SystemTime::now() - 2 * age;
    for record in [&recorded, &orphan] {
        std::fs::File::options()
            .write(true)
            .open(&record.files[0].host_path)
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    let held = BTreeSet::from([recorded.files[0].host_path.clone()]);
    let found = unrecorded_files(dir.path(), &held, age);
    assert_eq!(found, [orphan.files[0].host_path.clone()]);
    remove_unrecorded_file(&found[0]).unwrap();
    assert!(!orphan.dir.exists(), "its folders go with it");
    assert!(young.files[0].host_path.exists() && recorded.files[0].host_path.exists());
}
