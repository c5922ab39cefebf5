//! Guest signatures interoperate with the tools operators sign with: keys
//! and signatures made by the `openssl` command line (the same DER form
//! `cosign sign-blob` base64-encodes) verify here, and what `package
//! --sign-key` writes verifies with `openssl dgst -verify`. Tampered
//! bytes, another key and a malformed file are refused with the guest,
//! the signature file and the keys tried named.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine as _;
use wdp_policy::signature::{
    GuestSigningKey, SignatureError, TrustedKey, TrustedKeys, read_signature, signature_path,
};

/// Runs openssl with `args` in `dir`; panics with its output on failure
/// (a missing openssl fails the test: these tests are about it).
fn openssl(dir: &Path, args: &[&str]) -> Vec<u8> {
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
    out.stdout
}

/// A key pair made by openssl in `dir`: `<name>.pem` (PKCS#8 private key)
/// and `<name>.pub` (SubjectPublicKeyInfo PEM).
fn key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let private = format!("{name}.pem");
    let public = format!("{name}.pub");
    openssl(
        dir,
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &private,
        ],
    );
    openssl(dir, &["pkey", "-in", &private, "-pubout", "-out", &public]);
    (dir.join(private), dir.join(public))
}

/// Signs `allocate.wasm` in `dir` with `private` into `allocate.wasm.sig`,
/// as `openssl dgst -sha256 -sign` writes it (raw DER).
fn sign_with_openssl(dir: &Path, private: &Path) {
    openssl(
        dir,
        &[
            "dgst",
            "-sha256",
            "-sign",
            private.to_str().unwrap(),
            "-out",
            "allocate.wasm.sig",
            "allocate.wasm",
        ],
    );
}

/// A stand-in guest file (any bytes: signatures do not care what they sign).
fn guest(dir: &Path) -> PathBuf {
    let path = dir.join("allocate.wasm");
    std::fs::write(&path, b"\0asm\x0d\x00\x01\x00 a component's bytes").unwrap();
    path
}

fn verify(keys: &TrustedKeys, guest: &Path) -> Result<String, SignatureError> {
    let bytes = std::fs::read(guest).unwrap();
    let signature = read_signature(guest).unwrap();
    keys.verify(guest, &bytes, signature.as_deref())
        .map(|k| k.file().display().to_string())
}

#[test]
fn a_signature_made_by_openssl_verifies_raw_or_base64() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(dir.path(), "release");
    let guest = guest(dir.path());
    let keys = TrustedKeys::new([TrustedKey::read(&public).unwrap()]);

    // `openssl dgst -sha256 -sign` writes the raw DER signature.
    sign_with_openssl(dir.path(), &private);
    assert_eq!(signature_path(&guest), dir.path().join("allocate.wasm.sig"));
    assert!(verify(&keys, &guest).unwrap().ends_with("release.pub"));

    // The same DER in base64, as cosign sign-blob writes it.
    let der = std::fs::read(signature_path(&guest)).unwrap();
    let text = base64::engine::general_purpose::STANDARD.encode(der) + "\n";
    std::fs::write(signature_path(&guest), text).unwrap();
    assert!(verify(&keys, &guest).unwrap().ends_with("release.pub"));
}

#[test]
fn tampered_unsigned_wrong_key_and_malformed_are_refused_naming_what_was_tried() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(dir.path(), "release");
    let (_, other) = key_pair(dir.path(), "other");
    let guest = guest(dir.path());
    let ours = TrustedKeys::new([TrustedKey::read(&public).unwrap()]);

    let unsigned = verify(&ours, &guest).unwrap_err().to_string();
    assert!(unsigned.contains("not signed"), "{unsigned}");
    assert!(unsigned.contains("allocate.wasm.sig"), "{unsigned}");
    assert!(unsigned.contains("release.pub"), "{unsigned}");

    sign_with_openssl(dir.path(), &private);
    // Signed by a key not trusted.
    let theirs = TrustedKeys::new([TrustedKey::read(&other).unwrap()]);
    let wrong_key = verify(&theirs, &guest).unwrap_err().to_string();
    assert!(wrong_key.contains("does not verify"), "{wrong_key}");
    assert!(wrong_key.contains("other.pub"), "{wrong_key}");

    // One byte of the guest changed after signing.
    let mut bytes = std::fs::read(&guest).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&guest, &bytes).unwrap();
    let tampered = verify(&ours, &guest).unwrap_err().to_string();
    assert!(tampered.contains("does not verify"), "{tampered}");
    assert!(tampered.contains("allocate.wasm.sig"), "{tampered}");

    std::fs::write(signature_path(&guest), "not a signature").unwrap();
    let malformed = verify(&ours, &guest).unwrap_err().to_string();
    assert!(
        malformed.contains("is not an ECDSA signature"),
        "{malformed}"
    );
}

#[test]
fn what_we_sign_verifies_with_openssl_and_a_sec1_key_signs_too() {
    let dir = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(dir.path(), "release");
    let guest = guest(dir.path());
    let bytes = std::fs::read(&guest).unwrap();

    let key = GuestSigningKey::read(&private).unwrap();
    let signature = key.sign(&bytes);
    // Deterministic: packaging twice writes the same bytes.
    assert_eq!(signature, key.sign(&bytes));
    let der = base64::engine::general_purpose::STANDARD
        .decode(&signature)
        .unwrap();
    std::fs::write(dir.path().join("ours.sig"), der).unwrap();
    let verified = openssl(
        dir.path(),
        &[
            "dgst",
            "-sha256",
            "-verify",
            public.to_str().unwrap(),
            "-signature",
            "ours.sig",
            "allocate.wasm",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&verified).trim(), "Verified OK");
    // The public key read from either file has the same fingerprint.
    assert_eq!(
        key.public().fingerprint(),
        TrustedKey::read(&public).unwrap().fingerprint()
    );

    // `openssl ecparam -genkey` writes SEC1 (BEGIN EC PRIVATE KEY).
    openssl(
        dir.path(),
        &[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "sec1.pem",
        ],
    );
    let sec1 = GuestSigningKey::read(&dir.path().join("sec1.pem")).unwrap();
    std::fs::write(signature_path(&guest), sec1.sign(&bytes)).unwrap();
    let keys = TrustedKeys::new([sec1.public().clone()]);
    verify(&keys, &guest).unwrap();
}

#[test]
fn a_key_that_is_not_a_p256_public_key_is_refused_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let (private, _) = key_pair(dir.path(), "release");
    // A private key where a public one belongs.
    let error = TrustedKey::read(&private).unwrap_err().to_string();
    assert!(error.contains("release.pem"), "{error}");
    assert!(error.contains("BEGIN PUBLIC KEY"), "{error}");
    // An RSA key.
    openssl(
        dir.path(),
        &["genpkey", "-algorithm", "RSA", "-out", "rsa.pem"],
    );
    openssl(
        dir.path(),
        &["pkey", "-in", "rsa.pem", "-pubout", "-out", "rsa.pub"],
    );
    let error = TrustedKey::read(&dir.path().join("rsa.pub"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("rsa.pub"), "{error}");
}

#[test]
fn a_refused_key_is_named_for_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    // (openssl genpkey arguments, what the refusal names)
    let keys: [(&str, &[&str], &str); 4] = [
        (
            "p384",
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"],
            "ECDSA P-384 (secp384r1) key",
        ),
        (
            "k256",
            &[
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:secp256k1",
            ],
            "ECDSA secp256k1 key",
        ),
        ("rsa", &["-algorithm", "RSA"], "an RSA key"),
        ("ed25519", &["-algorithm", "ED25519"], "an Ed25519 key"),
    ];
    for (name, args, named) in keys {
        let (private, public) = (format!("{name}.pem"), format!("{name}.pub"));
        let mut genpkey = vec!["genpkey"];
        genpkey.extend_from_slice(args);
        genpkey.extend(["-out", private.as_str()]);
        openssl(dir.path(), &genpkey);
        openssl(
            dir.path(),
            &["pkey", "-in", &private, "-pubout", "-out", &public],
        );
        let errors = [
            TrustedKey::read(&dir.path().join(&public))
                .unwrap_err()
                .to_string(),
            GuestSigningKey::read(&dir.path().join(&private))
                .unwrap_err()
                .to_string(),
        ];
        for error in errors {
            assert!(error.contains(named), "{name}: {error}");
            // Not the identifiers the parser expected: P-256's, id-ecPublicKey.
            for expected in ["1.2.840.10045.3.1.7", "1.2.840.10045.2.1", "ecPublicKey"] {
                assert!(!error.contains(expected), "{name}: {error}");
            }
        }
    }
    // A SEC1 key on another curve (BEGIN EC PRIVATE KEY).
    openssl(
        dir.path(),
        &[
            "ecparam",
            "-name",
            "secp384r1",
            "-genkey",
            "-noout",
            "-out",
            "sec1.pem",
        ],
    );
    let error = GuestSigningKey::read(&dir.path().join("sec1.pem"))
        .unwrap_err()
        .to_string();
    assert!(error.contains("ECDSA P-384 (secp384r1) key"), "{error}");
    // A P-256 private key where the public one belongs says so.
    let (private, _) = key_pair(dir.path(), "release");
    let error = TrustedKey::read(&private).unwrap_err().to_string();
    assert!(error.contains("it is a private key"), "{error}");
}
