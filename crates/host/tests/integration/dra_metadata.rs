//! Device metadata (KEP-5304) as a workload meets it: after a prepare the
//! claim's CDI spec mounts one file per request where the upstream
//! consumers look, naming the claim and its devices with their
//! `pciBusID`; after an unprepare, also by a restarted host, the files are
//! gone; a metadata folder that cannot be used does not stop the host.

use std::path::{Path, PathBuf};

use crate::common::dra_world::*;
use k8s_openapi::api::resource::v1::ResourceClaim;

const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";

fn metadata_root(w: &DraWorld) -> PathBuf {
    w.world.plugins().join(DRIVER).join("dra-device-metadata")
}

fn metadata_file(w: &DraWorld, claim: &ResourceClaim, request: &str) -> PathBuf {
    metadata_root(w)
        .join(format!(
            "default_{}",
            claim.metadata.name.as_deref().unwrap()
        ))
        .join(request)
        .join("metadata.json")
}

/// The file's objects, in stream order.
fn read_stream(path: &Path) -> Vec<serde_json::Value> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<serde_json::Value>()
        .map(Result::unwrap)
        .collect()
}

/// The CDI device of `spec` named `name`.
fn cdi_device<'a>(spec: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    spec["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == name)
}

fn from_template(mut claim: ResourceClaim, pod_claim_name: &str) -> ResourceClaim {
    claim.metadata.annotations = Some(
        [(
            "resource.kubernetes.io/pod-claim-name".to_owned(),
            pod_claim_name.to_owned(),
        )]
        .into(),
    );
    claim
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_claims_metadata_is_mounted_and_removed_at_unprepare_also_after_a_restart() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    let two = w.api.put_claim(claim(
        "two-gpus",
        DRIVER,
        &[&name_of(GPU_A), &name_of(GPU_B)],
    ));
    let answer = prepare_one(&endpoint, &two).await;
    assert_eq!(answer.error, "");
    let two_uid = uid(&two);
    let mount_id = format!("example.com/gpu={two_uid}_metadata_gpus");
    assert!(
        answer.devices[0].cdi_device_ids.contains(&mount_id),
        "{:?}",
        answer.devices
    );
    assert!(
        !answer.devices[1].cdi_device_ids.contains(&mount_id),
        "once per request: {:?}",
        answer.devices
    );

    // The spec (checked as the runtimes' CDI library checks it) mounts the
    // file read-only where upstream consumers read it.
    let file = metadata_file(&w, &two, "gpus");
    let spec = read_cdi_spec(&spec_of(&w, &two));
    let mount = &cdi_device(&spec, &format!("{two_uid}_metadata_gpus"))
        .expect("the metadata mount's CDI device")["containerEdits"]["mounts"][0];
    assert_eq!(mount["hostPath"], file.display().to_string());
    assert_eq!(
        mount["containerPath"],
        format!("{CONTAINER_DIR}/resourceclaims/two-gpus/gpus/{DRIVER}-metadata.json")
    );
    assert_eq!(mount["options"], serde_json::json!(["ro", "bind"]));

    // The file: the claim and its devices, newest API version first.
    let stream = read_stream(&file);
    let versions: Vec<&str> = stream
        .iter()
        .map(|o| o["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        [
            "metadata.resource.k8s.io/v1beta1",
            "metadata.resource.k8s.io/v1alpha1"
        ]
    );
    let object = &stream[0];
    assert_eq!(object["kind"], "DeviceMetadata");
    assert_eq!(
        object["metadata"],
        serde_json::json!({"name": "two-gpus", "namespace": "default", "uid": two_uid, "generation": 1})
    );
    assert_eq!(object["requests"][0]["name"], "gpus");
    let devices = object["requests"][0]["devices"].as_array().unwrap();
    for (device, address) in devices.iter().zip([GPU_A, GPU_B]) {
        assert_eq!(device["driver"], DRIVER);
        assert_eq!(device["pool"], NODE);
        assert_eq!(device["name"], name_of(address));
        assert_eq!(
            device["attributes"]["resource.kubernetes.io/pciBusID"],
            serde_json::json!({"string": address})
        );
        assert!(
            device["attributes"]["resource.kubernetes.io/pcieRoot"]["string"].is_string(),
            "{device}"
        );
    }
    assert_eq!(devices.len(), 2);

    // The kubelet asks again: the same answer; a lost file is written again.
    assert_eq!(prepare_one(&endpoint, &two).await, answer);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(prepare_one(&endpoint, &two).await, answer);
    assert_eq!(read_stream(&file), stream);

    // A claim made from a template: the pod's name for it in the path.
    let templated = w.api.put_claim(from_template(
        claim("pod-a-gpu-x7k2p", DRIVER, &[&name_of("0000:08:00.0")]),
        "gpu",
    ));
    assert_eq!(prepare_one(&endpoint, &templated).await.error, "");
    let spec = read_cdi_spec(&spec_of(&w, &templated));
    let mount = &cdi_device(&spec, &format!("{}_metadata_gpus", uid(&templated))).unwrap()["containerEdits"]
        ["mounts"][0];
    assert_eq!(
        mount["containerPath"],
        format!("{CONTAINER_DIR}/resourceclaimtemplates/gpu/gpus/{DRIVER}-metadata.json")
    );
    assert_eq!(
        read_stream(&metadata_file(&w, &templated, "gpus"))[0]["podClaimName"],
        "gpu"
    );

    // A restarted host unprepares from the checkpoint: the files go.
    host.shutdown().await;
    let (host, endpoint) = w.serving().await;
    assert!(
        file.exists(),
        "a restart keeps the files of prepared claims"
    );
    for claim in [&two, &templated] {
        assert_eq!(unprepare_one(&endpoint, claim).await, "");
    }
    assert!(!file.exists());
    assert!(
        std::fs::read_dir(metadata_root(&w))
            .unwrap()
            .next()
            .is_none(),
        "the claims' folders are gone too"
    );
    assert!(cdi_specs(&w.cdi_dir()).is_empty());
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_metadata_off_writes_no_file_and_mounts_nothing() {
    let w = DraWorld::new("").await;
    w.world.write_config(
        "gpu.toml",
        &format!(
            "version = 1\nresource = \"example.com/gpu\"\napi = \"dra\"\ndriver = \"{DRIVER}\"\ndevice-metadata = false\n[[pci]]\nvendor = \"0x10de\"\nclass = \"0x0302\"\n"
        ),
    );
    let (host, endpoint) = w.serving().await;
    let one = w.api.put_claim(claim("one", DRIVER, &[&name_of(GPU_A)]));
    let answer = prepare_one(&endpoint, &one).await;
    assert_eq!(answer.error, "");
    assert_eq!(
        answer.devices[0].cdi_device_ids,
        [format!("example.com/gpu={}-{}", uid(&one), name_of(GPU_A))]
    );
    assert!(!metadata_file(&w, &one, "gpus").exists());
    assert_eq!(unprepare_one(&endpoint, &one).await, "");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metadata_folder_that_cannot_be_used_does_not_stop_the_host() {
    let w = DraWorld::new("").await;
    // Something that is not a folder where the folder goes.
    let root = metadata_root(&w);
    std::fs::create_dir_all(root.parent().unwrap()).unwrap();
    std::fs::write(&root, b"not a folder").unwrap();
    let (host, endpoint) = w.serving().await;
    let one = w.api.put_claim(claim("one", DRIVER, &[&name_of(GPU_A)]));
    let answer = prepare_one(&endpoint, &one).await;
    assert_eq!(answer.error, "", "the claim is prepared without its file");
    assert_eq!(answer.devices[0].cdi_device_ids.len(), 1);
    let spec = read_cdi_spec(&spec_of(&w, &one));
    assert_eq!(spec["devices"].as_array().unwrap().len(), 1, "{spec}");
    assert_eq!(unprepare_one(&endpoint, &one).await, "");

    // Once the folder can be used, the next claim gets its file.
    std::fs::remove_file(&root).unwrap();
    let two = w.api.put_claim(claim("two", DRIVER, &[&name_of(GPU_B)]));
    assert_eq!(prepare_one(&endpoint, &two).await.error, "");
    assert!(metadata_file(&w, &two, "gpus").exists());
    assert_eq!(unprepare_one(&endpoint, &two).await, "");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_that_fails_after_writing_the_metadata_leaves_none() {
    let w = DraWorld::new("").await;
    let (host, endpoint) = w.serving().await;
    // The claim's CDI spec cannot be written: the CDI folder is a file.
    std::fs::remove_dir_all(w.cdi_dir()).unwrap();
    std::fs::write(w.cdi_dir(), b"not a folder").unwrap();
    let one = w.api.put_claim(claim("one", DRIVER, &[&name_of(GPU_A)]));
    let error = prepare_one(&endpoint, &one).await.error;
    assert!(error.contains("CDI spec"), "{error}");
    let claim_dir = metadata_file(&w, &one, "gpus")
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_owned();
    assert!(!claim_dir.exists(), "{} left behind", claim_dir.display());

    // With the folder back the same claim prepares, with its file.
    std::fs::remove_file(w.cdi_dir()).unwrap();
    std::fs::create_dir(w.cdi_dir()).unwrap();
    assert_eq!(prepare_one(&endpoint, &one).await.error, "");
    assert!(metadata_file(&w, &one, "gpus").exists());
    assert_eq!(unprepare_one(&endpoint, &one).await, "");
    assert!(!claim_dir.exists());
    host.shutdown().await;
}
