//! Guest signatures: who vouches for a guest file before it is compiled.
//!
//! A signed guest `allocate.wasm` has its signature beside it, in
//! `allocate.wasm.sig`: an ECDSA P-256 signature over the file's SHA-256,
//! in ASN.1 DER. Two encodings of that DER are accepted, so both common
//! tools work unchanged:
//! - base64 text (what `cosign sign-blob --key … --output-signature` and
//!   [`GuestSigningKey::sign`] write; surrounding whitespace ignored);
//! - the raw DER bytes (what `openssl dgst -sha256 -sign key.pem` writes).
//!
//! Trusted keys are PEM public keys (`-----BEGIN PUBLIC KEY-----`, the
//! SubjectPublicKeyInfo form both `cosign generate-key-pair` and `openssl
//! pkey -pubout` write), P-256 only. Keys for signing (`package --sign-key`)
//! are unencrypted PEM private keys, PKCS#8 (`BEGIN PRIVATE KEY`, from
//! `openssl genpkey`) or SEC1 (`BEGIN EC PRIVATE KEY`, from `openssl
//! ecparam -genkey`); cosign's encrypted keys are not read (sign with
//! `cosign sign-blob` itself). The cryptography is RustCrypto's `p256`.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};
use sha2::{Digest, Sha256};

use crate::key_kind;
use wdp_regular_file::read_regular_file;

/// The largest signature or key file read (a DER P-256 signature is at most
/// 72 bytes, a PEM key a few hundred).
pub const MAX_SIGNATURE_FILE_BYTES: u64 = 16 * 1024;

/// The signature file of a guest file: its name with `.sig` appended.
pub fn signature_path(guest: &Path) -> PathBuf {
    let mut name = guest.as_os_str().to_owned();
    name.push(".sig");
    PathBuf::from(name)
}

/// Why a key or signature file could not be used, or a guest not verified.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// A key or signature file that cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: wdp_regular_file::RegularFileError,
    },
    /// A public key file that is not a PEM P-256 public key.
    #[error("{path} is not a PEM ECDSA P-256 public key (-----BEGIN PUBLIC KEY-----): {detail}")]
    PublicKey {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        detail: String,
    },
    /// A private key file that is not an unencrypted PEM P-256 key.
    #[error(
        "{path} is not an unencrypted PEM ECDSA P-256 private key \
         (BEGIN PRIVATE KEY or BEGIN EC PRIVATE KEY): {detail}"
    )]
    PrivateKey {
        /// The file.
        path: PathBuf,
        /// The parser's explanation.
        detail: String,
    },
    /// The guest has no signature file.
    #[error(
        "guest {guest}: not signed: no {} beside it (keys tried: {keys})",
        file_name(signature)
    )]
    Unsigned {
        /// The guest file.
        guest: PathBuf,
        /// Where its signature was looked for.
        signature: PathBuf,
        /// The trusted keys, as [`TrustedKeys`] displays them.
        keys: String,
    },
    /// The signature file holds no DER ECDSA signature in either encoding.
    #[error(
        "guest {guest}: {} is not an ECDSA signature (base64 or raw ASN.1 DER) (keys tried: {keys})",
        file_name(signature)
    )]
    Malformed {
        /// The guest file.
        guest: PathBuf,
        /// The signature file.
        signature: PathBuf,
        /// The trusted keys.
        keys: String,
    },
    /// No trusted key verifies the signature over the guest's bytes: a
    /// wrong key, or a guest or signature changed after signing.
    #[error(
        "guest {guest}: the signature in {} does not verify with any trusted key \
         (keys tried: {keys}); the guest was changed after signing or signed by another key",
        file_name(signature)
    )]
    Untrusted {
        /// The guest file.
        guest: PathBuf,
        /// The signature file.
        signature: PathBuf,
        /// The trusted keys.
        keys: String,
    },
}

/// One trusted public key and the file it came from.
#[derive(Clone)]
pub struct TrustedKey {
    file: PathBuf,
    key: VerifyingKey,
    fingerprint: String,
}

impl TrustedKey {
    /// Reads a PEM P-256 public key.
    pub fn read(file: &Path) -> Result<Self, SignatureError> {
        let bytes = read_small(file)?;
        let text = String::from_utf8_lossy(&bytes);
        let key =
            VerifyingKey::from_public_key_pem(&text).map_err(|e| SignatureError::PublicKey {
                path: file.to_owned(),
                detail: key_kind::mismatch(&bytes, "PUBLIC KEY").unwrap_or_else(|| e.to_string()),
            })?;
        Ok(Self::new(file.to_owned(), key))
    }

    fn new(file: PathBuf, key: VerifyingKey) -> Self {
        let der = key
            .to_public_key_der()
            .map(|d| d.as_bytes().to_vec())
            .unwrap_or_default();
        let digest = Sha256::digest(&der);
        let fingerprint = format!("sha256:{}", hex(&digest[..8]));
        Self {
            file,
            key,
            fingerprint,
        }
    }

    /// The file the key was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The first 8 bytes of the SHA-256 of the key's DER form, in hex
    /// (`sha256:1f2e…`): the same key read from another file has the same
    /// fingerprint.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

impl fmt::Display for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.file.display(), self.fingerprint)
    }
}

impl fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrustedKey({self})")
    }
}

impl PartialEq for TrustedKey {
    fn eq(&self, other: &Self) -> bool {
        self.file == other.file && self.key == other.key
    }
}

impl Eq for TrustedKey {}

/// The keys a guest's signature must verify with (any one of them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<TrustedKey>);

impl TrustedKeys {
    /// The keys, in the order given; a key given twice (by content) is kept
    /// once.
    pub fn new(keys: impl IntoIterator<Item = TrustedKey>) -> Self {
        let mut unique: Vec<TrustedKey> = Vec::new();
        for key in keys {
            if !unique.iter().any(|k| k.key == key.key) {
                unique.push(key);
            }
        }
        Self(unique)
    }

    /// Whether there is no key (signatures are then not required).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys.
    pub fn keys(&self) -> &[TrustedKey] {
        &self.0
    }

    /// Checks that `bytes`, the content of guest file `guest`, carry a
    /// signature (in [`signature_path`]) by one of the keys; answers that
    /// key. `signature` is the signature file's content, read by the caller
    /// beside the guest (`None` when it does not exist).
    pub fn verify(
        &self,
        guest: &Path,
        bytes: &[u8],
        signature: Option<&[u8]>,
    ) -> Result<&TrustedKey, SignatureError> {
        let signature_file = signature_path(guest);
        let keys = self.to_string();
        let Some(signature) = signature else {
            return Err(SignatureError::Unsigned {
                guest: guest.to_owned(),
                signature: signature_file,
                keys,
            });
        };
        let Some(signature) = parse_signature(signature) else {
            return Err(SignatureError::Malformed {
                guest: guest.to_owned(),
                signature: signature_file,
                keys,
            });
        };
        self.0
            .iter()
            .find(|k| k.key.verify(bytes, &signature).is_ok())
            .ok_or(SignatureError::Untrusted {
                guest: guest.to_owned(),
                signature: signature_file,
                keys,
            })
    }
}

impl fmt::Display for TrustedKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, key) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{key}")?;
        }
        Ok(())
    }
}

/// Reads the signature file beside `guest`: `Ok(None)` when there is none.
pub fn read_signature(guest: &Path) -> Result<Option<Vec<u8>>, SignatureError> {
    let path = signature_path(guest);
    match read_regular_file(&path, MAX_SIGNATURE_FILE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(wdp_regular_file::RegularFileError::Io(e))
            if e.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        Err(source) => Err(SignatureError::Read { path, source }),
    }
}

/// A key guests are signed with (`package --sign-key`).
pub struct GuestSigningKey {
    key: SigningKey,
    public: TrustedKey,
}

impl GuestSigningKey {
    /// Reads an unencrypted PEM P-256 private key, PKCS#8 or SEC1.
    pub fn read(file: &Path) -> Result<Self, SignatureError> {
        let bytes = read_small(file)?;
        let text = String::from_utf8_lossy(&bytes);
        let key = SigningKey::from_pkcs8_pem(&text)
            .map_err(|e| e.to_string())
            .or_else(|pkcs8| {
                p256::SecretKey::from_sec1_pem(&text)
                    .map(SigningKey::from)
                    .map_err(|sec1| format!("as PKCS#8: {pkcs8}; as SEC1: {sec1}"))
            })
            .map_err(|detail| SignatureError::PrivateKey {
                path: file.to_owned(),
                detail: key_kind::mismatch(&bytes, "PRIVATE KEY").unwrap_or(detail),
            })?;
        let public = TrustedKey::new(file.to_owned(), *key.verifying_key());
        Ok(Self { key, public })
    }

    /// The public half, named by the private key's file.
    pub fn public(&self) -> &TrustedKey {
        &self.public
    }

    /// The signature file content for `bytes`: base64 of the DER ECDSA
    /// signature over their SHA-256, as cosign writes it. Deterministic
    /// (RFC 6979): the same key and bytes always give the same signature.
    pub fn sign(&self, bytes: &[u8]) -> Vec<u8> {
        let signature: Signature = self.key.sign(bytes);
        base64::engine::general_purpose::STANDARD
            .encode(signature.to_der().as_bytes())
            .into_bytes()
    }
}

impl fmt::Debug for GuestSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GuestSigningKey({})", self.public)
    }
}

/// A DER signature, given as base64 text or as raw DER.
fn parse_signature(content: &[u8]) -> Option<Signature> {
    let text: Vec<u8> = content
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(&text)
        && let Ok(signature) = Signature::from_der(&der)
    {
        return Some(signature);
    }
    Signature::from_der(content).ok()
}

fn read_small(path: &Path) -> Result<Vec<u8>, SignatureError> {
    read_regular_file(path, MAX_SIGNATURE_FILE_BYTES).map_err(|source| SignatureError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A signature file's name: it lies beside the guest the message names.
fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |name| name.to_string_lossy().into_owned(),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
