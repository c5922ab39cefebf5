//! Signed guests (`[guest-signatures] trusted-keys`, in `host.toml` for
//! every resource or in one resource's file): keys and signatures are made
//! by the `openssl` command line, as an operator would make them. A guest
//! signed by a trusted key loads and `check` says who signed it; an
//! unsigned, wrongly signed or one-byte-tampered guest is refused at start
//! and at reload, naming the guest, its signature file and the keys tried,
//! while the last good guest keeps answering.

use std::path::Path;
use std::process::Command;

use crate::common::{WAIT, World, allocate_one};

pub(crate) const SIGNED: &str = "example.com/signed";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command line must be installed for these tests");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `keys/<name>.pem` and `keys/<name>.pub` in the config directory.
pub(crate) fn key_pair(world: &World, name: &str) {
    let keys = world.config().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    openssl(
        &keys,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &format!("{name}.pem"),
        ],
    );
    openssl(
        &keys,
        &[
            "pkey",
            "-in",
            &format!("{name}.pem"),
            "-pubout",
            "-out",
            &format!("{name}.pub"),
        ],
    );
}

/// Signs `guests/<guest>` with `keys/<key>.pem` (raw DER, as
/// `openssl dgst -sign` writes it) into `guests/<guest>.sig`.
pub(crate) fn sign(world: &World, guest: &str, key: &str) {
    openssl(
        &world.config(),
        &[
            "dgst",
            "-sha256",
            "-sign",
            &format!("keys/{key}.pem"),
            "-out",
            &format!("guests/{guest}.sig"),
            &format!("guests/{guest}"),
        ],
    );
}

/// One device node served with the allocate shaper as its allocate guest,
/// signed by `keys/release.pem`; `host.toml` trusts `keys/release.pub`
/// when `in_host` is set, else the resource file does.
pub(crate) fn signed_world(in_host: bool) -> World {
    let world = World::new(None);
    key_pair(&world, "release");
    key_pair(&world, "other");
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate.wasm");
    sign(&world, "allocate.wasm", "release");
    world.write_host("/dev/signed0", "");
    let trust = "[guest-signatures]\ntrusted-keys = [\"keys/release.pub\"]\n";
    let (host_trust, resource_trust) = if in_host { (trust, "") } else { ("", trust) };
    world.write_config(
        "host.toml",
        &format!("version = 1\npoll-interval-ms = 60000\nreload-debounce-ms = 20\n{host_trust}"),
    );
    world.write_config(
        "signed.toml",
        &format!(
            "version = 1\nresource = \"{SIGNED}\"\n[[nodes]]\npath = \"/dev/signed0\"\n\
             [hooks.allocate]\nguest = \"guests/allocate.wasm\"\n{resource_trust}"
        ),
    );
    world
}

fn check_error(world: &World) -> String {
    wdp_host::check(&world.config(), &world.root())
        .unwrap_err()
        .to_string()
}

#[test]
fn check_says_who_signed_each_guest_whether_trusted_by_host_toml_or_the_resource() {
    for in_host in [true, false] {
        let world = signed_world(in_host);
        let reports = wdp_host::check(&world.config(), &world.root()).unwrap();
        let signer = reports[0].hooks[0].signed_by.clone().unwrap_or_default();
        assert!(signer.contains("keys/release.pub"), "{signer}");
        assert!(signer.contains("(sha256:"), "{signer}");
    }
}

#[test]
fn unsigned_wrongly_signed_and_tampered_guests_are_refused_naming_guest_signature_and_keys() {
    let world = signed_world(true);
    let sig = world.config().join("guests/allocate.wasm.sig");

    std::fs::remove_file(&sig).unwrap();
    let error = check_error(&world);
    for part in [
        "signed.toml",
        "guests/allocate.wasm",
        "allocate.wasm.sig",
        "not signed",
        "keys/release.pub",
    ] {
        assert!(error.contains(part), "{part}: {error}");
    }

    sign(&world, "allocate.wasm", "other");
    let error = check_error(&world);
    assert!(error.contains("does not verify"), "{error}");
    assert!(error.contains("keys/release.pub"), "{error}");

    sign(&world, "allocate.wasm", "release");
    let guest = world.config().join("guests/allocate.wasm");
    let mut bytes = std::fs::read(&guest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&guest, &bytes).unwrap();
    let error = check_error(&world);
    assert!(error.contains("does not verify"), "{error}");
    assert!(error.contains("allocate.wasm.sig"), "{error}");
}

#[test]
fn a_trusted_key_that_cannot_be_read_is_refused_by_file_and_field() {
    let world = signed_world(true);
    std::fs::write(world.config().join("keys/release.pub"), "garbage").unwrap();
    let error = check_error(&world);
    assert!(error.contains("host.toml"), "{error}");
    assert!(
        error.contains("guest-signatures.trusted-keys[0]"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsigned_guest_is_refused_at_start_and_a_tampered_one_at_reload_while_the_signed_one_answers()
 {
    let world = signed_world(true);
    let sig = world.config().join("guests/allocate.wasm.sig");
    let signature = std::fs::read(&sig).unwrap();
    std::fs::remove_file(&sig).unwrap();
    let error = wdp_host::Host::start(world.options(), wdp_host::Metrics::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("not signed"), "{error}");

    std::fs::write(&sig, &signature).unwrap();
    let kubelet = world.kubelet().await;
    let host = world.start().await;
    let record = kubelet.wait_registered(SIGNED, 1, WAIT).await.unwrap();
    let id = record.devices[0].id.clone();
    let mut client = kubelet.client(SIGNED).await.unwrap();
    let shaped = |answer: &wdp_kubelet_api::v1beta1::AllocateResponse| {
        answer.container_responses[0]
            .envs
            .get("WDP_VISIBLE_DEVICES")
            .cloned()
    };
    let before = client
        .allocate(allocate_one(&id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shaped(&before).as_deref(), Some(id.as_str()));

    // Another valid guest dropped in place, keeping the old signature.
    world.install_guest(wdp_guest_artifacts::CLAIM_ECHO, "allocate.wasm");
    let error = host.reload().await.unwrap_err().to_string();
    assert!(error.contains("does not verify"), "{error}");
    assert!(error.contains("allocate.wasm.sig"), "{error}");
    let after = client
        .allocate(allocate_one(&id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(shaped(&after), shaped(&before));

    // The signed build back, its signature removed: refused as unsigned
    // though the guest's bytes are the ones serving.
    world.install_guest(wdp_guest_artifacts::ALLOCATE_SHAPER, "allocate.wasm");
    std::fs::remove_file(&sig).unwrap();
    let error = host.reload().await.unwrap_err().to_string();
    assert!(error.contains("not signed"), "{error}");
    host.shutdown().await;
}
