//! The checkpoint's checksums: FNV-1a over bytes, and the canonical form
//! `canonical-checksum` is taken over (compact JSON, every object's keys
//! in byte order), which is the same whichever host wrote the file and in
//! whatever field order.

use serde_json::Value;

/// FNV-1a (64 bits) of `bytes`, in hex.
pub(crate) fn fnv1a(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The checksum of `claims` with every object's keys sorted: the same for
/// any writer's field order.
pub(crate) fn canonical_checksum(claims: &Value) -> String {
    let mut bytes = Vec::new();
    write_canonical(claims, &mut bytes);
    fnv1a(&bytes)
}

/// Compact JSON with object keys in byte order (whichever map type
/// `serde_json` was built with).
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend(serde_json::to_vec(key).unwrap_or_default());
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}
