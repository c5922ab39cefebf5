//! OCI content digests: `sha256:` and the lower-case hex SHA-256.

use sha2::{Digest, Sha256};

/// The OCI digest of `bytes`, `sha256:<hex>`.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in hash {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0xf), 16).unwrap_or('0'));
    }
    out
}
