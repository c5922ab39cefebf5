//! What a PEM key file holds, named for a refusal: its algorithm and, for
//! an elliptic-curve key, its curve ("an ECDSA P-384 (secp384r1) key", "an
//! RSA key"), read from the object identifiers of its DER. The parser's
//! own errors name the identifier it expected (P-256's, or
//! id-ecPublicKey), not the one the file holds.

use p256::pkcs8::ObjectIdentifier;

/// id-ecPublicKey: an elliptic-curve key, its curve the next identifier.
const EC_PUBLIC_KEY: &str = "1.2.840.10045.2.1";
/// The curve guests are signed on.
const P256: &str = "1.2.840.10045.3.1.7";

/// Curves by identifier.
const CURVES: &[(&str, &str)] = &[
    (P256, "P-256 (prime256v1)"),
    ("1.3.132.0.34", "P-384 (secp384r1)"),
    ("1.3.132.0.35", "P-521 (secp521r1)"),
    ("1.3.132.0.10", "secp256k1"),
    ("1.2.840.10045.3.1.1", "P-192 (prime192v1)"),
    ("1.3.132.0.33", "P-224 (secp224r1)"),
    ("1.3.36.3.3.2.8.1.1.7", "brainpoolP256r1"),
    ("1.3.36.3.3.2.8.1.1.11", "brainpoolP384r1"),
    ("1.3.36.3.3.2.8.1.1.13", "brainpoolP512r1"),
    ("1.2.156.10197.1.301", "SM2"),
];

/// Other algorithms by identifier.
const ALGORITHMS: &[(&str, &str)] = &[
    ("1.2.840.113549.1.1.1", "an RSA key"),
    ("1.2.840.113549.1.1.10", "an RSA-PSS key"),
    ("1.3.101.112", "an Ed25519 key"),
    ("1.3.101.113", "an Ed448 key"),
    ("1.3.101.110", "an X25519 key"),
    ("1.3.101.111", "an X448 key"),
    ("1.2.840.10040.4.1", "a DSA key"),
    ("1.2.840.10046.2.1", "a Diffie-Hellman key"),
    ("1.2.840.113549.1.3.1", "a Diffie-Hellman key"),
];

/// What the PEM `text` holds when it is not what was `expected` (a PEM
/// label, `PUBLIC KEY`, or `PRIVATE KEY` for either private form): `it is
/// an RSA key`, `it is an ECDSA P-384 (secp384r1) key`, `it holds a BEGIN
/// CERTIFICATE block`. `None` when it is a P-256 key in the expected form
/// or cannot be read as PEM (the parser's own error says why).
pub(crate) fn mismatch(text: &[u8], expected: &str) -> Option<String> {
    let (label, der) = p256::pkcs8::der::pem::decode_vec(text).ok()?;
    let private = label == "PRIVATE KEY" || label == "EC PRIVATE KEY";
    let key = label == "PUBLIC KEY" || private;
    let kind = key.then(|| kind(&der, label == "EC PRIVATE KEY")).flatten();
    match kind {
        Some(kind) => Some(format!("it is {kind}; only ECDSA P-256 keys are accepted")),
        None if !key => Some(format!("it holds a BEGIN {label} block")),
        None if (expected == "PUBLIC KEY") == private => Some(format!(
            "it is a {} key (BEGIN {label})",
            if private { "private" } else { "public" }
        )),
        None => None,
    }
}

/// The key's kind when it is not a P-256 key (`sec1`: an `EC PRIVATE
/// KEY`, whose curve is its only identifier).
fn kind(der: &[u8], sec1: bool) -> Option<String> {
    let mut oids = Vec::new();
    collect_oids(der, 0, &mut oids);
    let ec = oids.iter().position(|oid| oid == EC_PUBLIC_KEY);
    if ec.is_some() || sec1 {
        let curve = oids.get(ec.map_or(0, |i| i + 1));
        return match curve.map(String::as_str) {
            Some(P256) => None,
            Some(oid) => Some(match CURVES.iter().find(|(id, _)| *id == oid) {
                Some((_, name)) => format!("an ECDSA {name} key"),
                None => format!("an elliptic-curve key on curve {oid}"),
            }),
            None => Some("an elliptic-curve key that names no curve".to_owned()),
        };
    }
    let first = oids.first()?;
    Some(
        match ALGORITHMS.iter().find(|(id, _)| *id == first.as_str()) {
            Some((_, name)) => (*name).to_owned(),
            None => format!("a key of algorithm {first}"),
        },
    )
}

/// Every object identifier in `der`, in order, constructed values
/// entered (octet strings are not).
fn collect_oids(der: &[u8], depth: usize, out: &mut Vec<String>) {
    let mut rest = der;
    while let Some((tag, content, next)) = tlv(rest) {
        if tag == 0x06 {
            if let Ok(oid) = ObjectIdentifier::from_bytes(content) {
                out.push(oid.to_string());
            }
        } else if tag & 0x20 != 0 && depth < 8 {
            collect_oids(content, depth + 1, out);
        }
        rest = next;
    }
}

/// One DER value: its tag, its content and what follows it.
fn tlv(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = bytes.split_first()?;
    // Multi-byte tags do not occur in keys.
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (len, after) = rest.split_at(n);
        rest = after;
        len.iter().fold(0, |acc, &b| (acc << 8) | usize::from(b))
    };
    (rest.len() >= len).then(|| {
        let (content, next) = rest.split_at(len);
        (tag, content, next)
    })
}
