//! `package`: guests written as an OCI image archive, mounted the way an
//! image volume mounts it, and served from there with a pin copied from
//! what `package` printed.

use std::io::Read;
use std::path::Path;

use crate::support::{World, run_to_end};

/// Unpacks the one layer of the OCI archive `archive` into `root`, as a
/// container runtime mounting the image would.
fn unpack(archive: &Path, root: &Path) {
    let bytes = std::fs::read(archive).unwrap();
    let mut blobs = std::collections::BTreeMap::new();
    for entry in tar::Archive::new(bytes.as_slice()).entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        blobs.insert(path, content);
    }
    let index: serde_json::Value = serde_json::from_slice(&blobs["index.json"]).unwrap();
    let blob = |digest: &serde_json::Value| {
        let hex = digest.as_str().unwrap().trim_start_matches("sha256:");
        blobs[&format!("blobs/sha256/{hex}")].clone()
    };
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&index["manifests"][0]["digest"])).unwrap();
    let layer = blob(&manifest["layers"][0]["digest"]);
    tar::Archive::new(flate2::read::GzDecoder::new(layer.as_slice()))
        .unpack(root)
        .unwrap();
}

#[test]
fn packaged_guests_are_served_from_the_mounted_image_with_a_pin_copied_from_package() {
    let world = World::new();
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate-shaper.wasm");
    let guests = world.config().join("guests");
    let archive = world.tmp.path().join("out/guests.oci.tar");
    let args = [
        "package",
        "--guests",
        guests.to_str().unwrap(),
        "--output",
        archive.to_str().unwrap(),
        "--tag",
        "1.0",
    ];
    let (code, first, stderr) = run_to_end(&args);
    assert_eq!(code, 0, "{stderr}");
    let first_archive = std::fs::read(&archive).unwrap();
    let (code, second, stderr) = run_to_end(&args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(first, second, "two packages of the same guests differ");
    assert_eq!(std::fs::read(&archive).unwrap(), first_archive);
    let digest_line = first.lines().find(|l| l.starts_with("digest sha256:"));
    assert!(digest_line.is_some(), "{first}");

    // The guest's own digest, as printed, becomes the pin.
    let pin = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("guests/allocate-shaper.wasm sha256:"))
        .unwrap()
        .to_owned();
    let mount = world.tmp.path().join("image");
    std::fs::create_dir_all(&mount).unwrap();
    unpack(&archive, &mount);
    world.add_node("/dev/pkg0");
    std::fs::remove_dir_all(&guests).unwrap();
    world.write_config(
        "pkg.toml",
        &format!(
            "version = 1\nresource = \"e2e.example.com/pkg\"\n[[nodes]]\npath = \"/dev/pkg0\"\n\
             [hooks.allocate]\nguest = \"{}\"\nsha256 = \"{pin}\"\n",
            mount.join("guests/allocate-shaper.wasm").display()
        ),
    );
    let config = world.config();
    let root = world.root();
    let (code, out, stderr) = run_to_end(&[
        "check",
        "--config-dir",
        config.to_str().unwrap(),
        "--host-root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{stderr}");
    assert!(
        out.contains(&format!(
            "hook allocate: allocate-shaper.wasm sha256:{pin} (pinned)"
        )),
        "{out}"
    );
}

#[test]
fn a_file_the_host_would_refuse_is_never_packaged() {
    let world = World::new();
    let guests = world.tmp.path().join("guests");
    std::fs::create_dir_all(&guests).unwrap();
    std::fs::write(guests.join("broken.wasm"), b"not a component").unwrap();
    let archive = world.tmp.path().join("broken.oci.tar");
    // `package` refuses the folder with an error mentioning `needle` and
    // writes no archive.
    let refused = |needle: &str| {
        let (code, _, stderr) = run_to_end(&[
            "package",
            "--guests",
            guests.to_str().unwrap(),
            "--output",
            archive.to_str().unwrap(),
        ]);
        assert_ne!(code, 0);
        assert!(stderr.contains(needle), "{stderr}");
        assert!(!archive.exists(), "an archive was written");
    };
    refused("guests/broken.wasm");

    // A folder without any guest.
    std::fs::remove_file(guests.join("broken.wasm")).unwrap();
    refused("no .wasm guest");
}

/// A P-256 private key made by openssl at `path` (PKCS#8 PEM).
fn p256_key(path: &Path) {
    let status = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(path)
        .status()
        .expect("the openssl command line must be installed");
    assert!(status.success());
}

/// The `.sig` files beneath `dir`.
fn signatures(dir: &Path) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sig"))
        .collect();
    found.sort();
    found
}

#[test]
fn signing_vouches_for_no_guest_of_a_refused_package() {
    let world = World::new();
    let guests = world.tmp.path().join("guests");
    std::fs::create_dir_all(&guests).unwrap();
    std::fs::copy(
        wdp_guest_artifacts::ALLOCATE_SHAPER,
        guests.join("good.wasm"),
    )
    .unwrap();
    std::fs::write(guests.join("broken.wasm"), b"not a component").unwrap();
    let key = world.tmp.path().join("release.pem");
    p256_key(&key);
    let archive = world.tmp.path().join("signed.oci.tar");
    let args = [
        "package",
        "--guests",
        guests.to_str().unwrap(),
        "--output",
        archive.to_str().unwrap(),
        "--sign-key",
        key.to_str().unwrap(),
    ];
    let (code, out, stderr) = run_to_end(&args);
    assert_ne!(code, 0, "{out}");
    assert!(stderr.contains("guests/broken.wasm"), "{stderr}");
    assert_eq!(signatures(&guests), Vec::<String>::new(), "{out}");
    assert!(!out.contains("signed"), "{out}");
    assert!(!archive.exists());

    // Packaging that fails after the guests loaded (the output cannot be
    // written) takes its signatures back too.
    std::fs::remove_file(guests.join("broken.wasm")).unwrap();
    std::fs::write(world.tmp.path().join("file"), b"").unwrap();
    let blocked = world.tmp.path().join("file/out.oci.tar");
    let mut blocked_args = args;
    blocked_args[4] = blocked.to_str().unwrap();
    let (code, out, _) = run_to_end(&blocked_args);
    assert_ne!(code, 0, "{out}");
    assert_eq!(signatures(&guests), Vec::<String>::new(), "{out}");

    // Once every guest loads, each is signed and packaged.
    let (code, out, stderr) = run_to_end(&args);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(signatures(&guests), ["good.wasm.sig"], "{out}");
    assert!(out.contains("signed guests/good.wasm"), "{out}");
}
