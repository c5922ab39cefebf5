//! Server-made values: object UIDs (random UUID v4 strings), the random suffixes appended to
//! `metadata.generateName`, and the timestamps the server stamps.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

/// 64 unpredictable bits: std's randomly keyed SipHash over a process-wide counter.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.finish()
}

/// A new UID in the canonical UUID v4 form, e.g. `3f0c…-…`.
pub(crate) fn new_uid() -> String {
    let high = random_u64();
    let low = random_u64();
    // Version 4 in the 13th hex digit, variant 10xx in the 17th.
    let high = (high & !0xF000) | 0x4000;
    let low = (low & !(0xC000 << 48)) | (0x8000 << 48);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        high >> 32,
        (high >> 16) & 0xFFFF,
        high & 0xFFFF,
        low >> 48,
        low & 0xFFFF_FFFF_FFFF
    )
}

/// Now, to the second (the precision of `metav1.Time`).
pub(crate) fn now() -> k8s_openapi::jiff::Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seconds = i64::try_from(since_epoch.as_secs()).unwrap_or(i64::MAX);
    k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap_or(k8s_openapi::jiff::Timestamp::MAX)
}

/// The alphabet apiserver uses for generated names (no vowels, no look-alikes).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five random characters for `generateName`.
pub(crate) fn generated_name_suffix() -> String {
    let mut bits = random_u64();
    (0..5)
        .map(|_| {
            let c = SUFFIX_ALPHABET[(bits % SUFFIX_ALPHABET.len() as u64) as usize];
            bits /= SUFFIX_ALPHABET.len() as u64;
            c as char
        })
        .collect()
}

#[cfg(test)]
#[path = "identity_tests.rs"]
mod tests;
