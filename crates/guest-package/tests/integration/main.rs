//! Packages built from real folders and read back as an OCI tool reads
//! them: the archive's index, manifest, config and layer, by digest.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wdp_guest_package::{PackageError, PackageOptions, package};

fn options(dir: &Path, output: &str) -> PackageOptions {
    PackageOptions {
        guests: dir.join("guests"),
        config: None,
        installer: None,
        output: dir.join(output),
        tag: "0.1.0".to_owned(),
        architecture: "amd64".to_owned(),
        epoch: 0,
    }
}

/// A folder with two guests (one in a subfolder) and a README.
fn inputs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let guests = dir.path().join("guests");
    std::fs::create_dir_all(guests.join("extra")).unwrap();
    std::fs::write(guests.join("a.wasm"), b"\0asm guest a").unwrap();
    std::fs::write(guests.join("extra/b.wasm"), b"\0asm guest b").unwrap();
    std::fs::write(guests.join("README"), b"two guests").unwrap();
    dir
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every regular file of a tar, by path.
fn tar_files(bytes: &[u8]) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(bytes).entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type().is_file() {
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            files.insert(path, content);
        }
    }
    files
}

/// A blob of the archive, checked against its digest.
fn blob(archive: &BTreeMap<String, Vec<u8>>, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").unwrap();
    let bytes = archive[&format!("blobs/sha256/{hex}")].clone();
    assert_eq!(hex_sha256(&bytes), hex, "blob {digest} holds other bytes");
    bytes
}

#[test]
fn a_package_is_an_oci_archive_whose_layer_holds_the_guests() {
    let dir = inputs();
    let report = package(&options(dir.path(), "out/guests.oci.tar")).unwrap();
    let archive = tar_files(&std::fs::read(&report.output).unwrap());
    assert_eq!(archive["oci-layout"], br#"{"imageLayoutVersion":"1.0.0"}"#);

    let index: serde_json::Value = serde_json::from_slice(&archive["index.json"]).unwrap();
    let entry = &index["manifests"][0];
    assert_eq!(entry["digest"], report.manifest_digest.as_str());
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        "0.1.0"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&archive, &report.manifest_digest)).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&blob(
        &archive,
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], "amd64");

    // The layer: gzip of a tar whose digest is the config's diff_id.
    let layer_gz = blob(&archive, manifest["layers"][0]["digest"].as_str().unwrap());
    let mut layer = Vec::new();
    flate2::read::GzDecoder::new(layer_gz.as_slice())
        .read_to_end(&mut layer)
        .unwrap();
    assert_eq!(
        config["rootfs"]["diff_ids"][0],
        format!("sha256:{}", hex_sha256(&layer))
    );
    let files = tar_files(&layer);
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        ["guests/README", "guests/a.wasm", "guests/extra/b.wasm"]
    );
    assert_eq!(files["guests/extra/b.wasm"], b"\0asm guest b");

    // Each guest's digest is in the manifest, as a pin would name it.
    let listed = manifest["annotations"]["io.wasm-device-plugin.guests"]
        .as_str()
        .unwrap();
    assert!(
        listed.contains(&format!(
            "guests/a.wasm=sha256:{}",
            hex_sha256(b"\0asm guest a")
        )),
        "{listed}"
    );
    assert!(!listed.contains("README"), "{listed}");
}

#[test]
fn the_same_inputs_give_the_same_bytes_whatever_their_timestamps() {
    let dir = inputs();
    let first = package(&options(dir.path(), "first.oci.tar")).unwrap();
    // Every input given another modification time, same content.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
    for file in ["guests/a.wasm", "guests/extra/b.wasm", "guests/README"] {
        let path = dir.path().join(file);
        let handle = std::fs::File::options().write(true).open(&path).unwrap();
        handle.set_modified(later).unwrap();
    }
    let second = package(&options(dir.path(), "second.oci.tar")).unwrap();
    assert_eq!(first.manifest_digest, second.manifest_digest);
    assert_eq!(
        std::fs::read(&first.output).unwrap(),
        std::fs::read(&second.output).unwrap()
    );

    // A different content or epoch is a different image.
    let mut later = options(dir.path(), "later.oci.tar");
    later.epoch = 1_700_000_000;
    assert_ne!(
        package(&later).unwrap().manifest_digest,
        first.manifest_digest
    );
    std::fs::write(dir.path().join("guests/a.wasm"), b"\0asm guest a, rebuilt").unwrap();
    let rebuilt = package(&options(dir.path(), "rebuilt.oci.tar")).unwrap();
    assert_ne!(rebuilt.manifest_digest, first.manifest_digest);
}

#[test]
fn a_config_folder_is_shipped_beside_the_guests() {
    let dir = inputs();
    let config = dir.path().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("gpu.toml"), b"version = 1\n").unwrap();
    let mut with_config = options(dir.path(), "with-config.oci.tar");
    with_config.config = Some(config);
    let report = package(&with_config).unwrap();
    let paths: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "config/gpu.toml",
            "guests/README",
            "guests/a.wasm",
            "guests/extra/b.wasm"
        ]
    );
}

/// `package` refuses `options` with an error mentioning `needle`, and
/// leaves neither its archive nor a partial one behind.
fn refused(options: &PackageOptions, needle: &str) -> PackageError {
    let error = package(options).unwrap_err();
    assert!(error.to_string().contains(needle), "{error}");
    let mut partial = options.output.clone().into_os_string();
    partial.push(".partial");
    for left in [options.output.clone(), PathBuf::from(partial)] {
        assert!(!left.exists(), "left behind: {}", left.display());
    }
    error
}

#[test]
fn bad_inputs_are_refused_by_name_and_nothing_is_written() {
    // No .wasm at all.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("guests")).unwrap();
    std::fs::write(dir.path().join("guests/README"), b"no guests").unwrap();
    let error = refused(&options(dir.path(), "none.oci.tar"), "no .wasm guest");
    assert!(matches!(error, PackageError::NoGuests { .. }), "{error:?}");

    // A symlink leading out of the folder.
    let dir = inputs();
    std::fs::write(dir.path().join("secret"), b"outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), dir.path().join("guests/leak")).unwrap();
    let error = refused(&options(dir.path(), "leak.oci.tar"), "guests/leak");
    assert!(
        matches!(error, PackageError::SymlinkOut { .. }),
        "{error:?}"
    );

    // A symlink that stays inside is packaged as the file it names.
    let dir = inputs();
    std::os::unix::fs::symlink("a.wasm", dir.path().join("guests/current.wasm")).unwrap();
    let report = package(&options(dir.path(), "inside.oci.tar")).unwrap();
    let current = report
        .files
        .iter()
        .find(|f| f.path == "guests/current.wasm")
        .unwrap();
    assert_eq!(current.bytes, b"\0asm guest a");

    // A FIFO: refused by kind, never opened (opening one would block).
    let dir = inputs();
    let fifo = dir.path().join("guests/pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let error = refused(&options(dir.path(), "fifo.oci.tar"), "a FIFO");
    assert!(matches!(error, PackageError::NotAFile { .. }), "{error:?}");

    // A guests folder that does not exist.
    let dir = tempfile::tempdir().unwrap();
    refused(&options(dir.path(), "missing.oci.tar"), "guests");
}

/// The smallest 64-bit little-endian ELF header with no program headers,
/// hence no interpreter: what the installer check calls static.
fn static_elf() -> Vec<u8> {
    let mut elf = vec![0u8; 64];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2; // 64-bit
    elf[5] = 1; // little-endian
    elf[6] = 1; // version
    elf[0x36] = 56; // program header entry size, no entries
    elf
}

#[test]
fn an_installer_becomes_the_entrypoint_and_only_a_static_one_is_taken() {
    let dir = inputs();
    let installer = dir.path().join("wdp-static");
    std::fs::write(&installer, static_elf()).unwrap();
    let mut with_installer = options(dir.path(), "installer.oci.tar");
    with_installer.installer = Some(installer);
    let report = package(&with_installer).unwrap();
    let archive = tar_files(&std::fs::read(&report.output).unwrap());
    let manifest: serde_json::Value =
        serde_json::from_slice(&blob(&archive, &report.manifest_digest)).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&blob(
        &archive,
        manifest["config"]["digest"].as_str().unwrap(),
    ))
    .unwrap();
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!(["/usr/local/bin/wasm-device-plugin", "install-guests"])
    );
    let layer_gz = blob(&archive, manifest["layers"][0]["digest"].as_str().unwrap());
    let mut layer = tar::Archive::new(flate2::read::GzDecoder::new(layer_gz.as_slice()));
    let mode = layer
        .entries()
        .unwrap()
        .map(|e| e.unwrap())
        .find(|e| e.path().unwrap().to_string_lossy() == "usr/local/bin/wasm-device-plugin")
        .map(|e| e.header().mode().unwrap());
    assert_eq!(mode, Some(0o755));

    // A dynamically linked build needs a loader the image does not have.
    let dynamic = std::env::current_exe().unwrap();
    let mut with_dynamic = options(dir.path(), "dynamic.oci.tar");
    with_dynamic.installer = Some(dynamic);
    let error = refused(&with_dynamic, "not a statically linked ELF executable");
    assert!(matches!(error, PackageError::NotStatic { .. }), "{error:?}");
}

#[test]
fn install_guests_copies_the_folder_whole_and_refuses_what_packaging_refuses() {
    let dir = inputs();
    let target = dir.path().join("mounted/guests");
    let copied = wdp_guest_package::install_guests(&dir.path().join("guests"), &target).unwrap();
    assert_eq!(copied.len(), 3);
    assert_eq!(
        std::fs::read(target.join("extra/b.wasm")).unwrap(),
        b"\0asm guest b"
    );
    let left: Vec<_> = walk(&target)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    std::fs::write(dir.path().join("secret"), b"outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), dir.path().join("guests/leak")).unwrap();
    let error =
        wdp_guest_package::install_guests(&dir.path().join("guests"), &dir.path().join("other"))
            .unwrap_err();
    assert!(
        matches!(error, PackageError::SymlinkOut { .. }),
        "{error:?}"
    );
    assert!(
        !dir.path().join("other").exists(),
        "a refused copy wrote files"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
