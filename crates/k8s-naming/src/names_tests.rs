//! Unit tests of the device ID ↔ name mapping and the DNS name checks.

use super::*;

#[test]
fn documented_examples_encode_and_decode() {
    let examples = [
        ("nvidia0", "nvidia0"),
        ("0000:3b:00.0", "0000-3a3b-3a00-2e0"),
        ("gpu0::1", "gpu0-3a-3a1"),
        ("GPU-ab", "x-47-50-55-2dab"),
        ("xe0", "x-78e0"),
        ("ex", "ex"),
    ];
    for (id, name) in examples {
        assert_eq!(device_name(id).unwrap(), name, "encoding {id:?}");
        assert_eq!(device_id(name).unwrap(), id, "decoding {name:?}");
    }
}

/// A small deterministic generator, so the property loops need no extra crate
/// and a failure is reproducible.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }
}

fn random_id(rng: &mut XorShift) -> String {
    const ALPHABET: &[char] = &[
        'a', 'x', 'z', '0', '9', 'A', 'Z', 'X', '-', ':', '.', '_', '/', ' ', 'é', '€', '🦀',
        '\u{0}',
    ];
    let len = 1 + rng.below(20);
    (0..len)
        .map(|_| ALPHABET[rng.below(ALPHABET.len())])
        .collect()
}

#[test]
fn random_ids_round_trip_and_encode_to_dns_labels() {
    let mut rng = XorShift(0x5eed_1234_abcd_0001);
    let mut encoded_count = 0;
    for _ in 0..20_000 {
        let id = random_id(&mut rng);
        match device_name(&id) {
            Ok(name) => {
                encoded_count += 1;
                assert_eq!(dns_label_problem(&name), None, "{id:?} → {name:?}");
                assert_eq!(
                    device_id(&name).unwrap(),
                    id,
                    "round trip of {id:?} via {name:?}"
                );
            }
            Err(NameError::NameTooLong { encoded_len, .. }) => assert!(encoded_len > 63),
            Err(other) => panic!("unexpected refusal of {id:?}: {other}"),
        }
    }
    assert!(
        encoded_count > 10_000,
        "most random IDs fit: {encoded_count}"
    );
}

#[test]
fn distinct_ids_get_distinct_names() {
    let mut rng = XorShift(0x0dd_ba11);
    let mut seen = std::collections::HashMap::new();
    for _ in 0..20_000 {
        let id = random_id(&mut rng);
        if let Ok(name) = device_name(&id)
            && let Some(previous) = seen.insert(name.clone(), id.clone())
        {
            assert_eq!(previous, id, "two IDs share the name {name:?}");
        }
    }
}

#[test]
fn every_dns_label_is_either_refused_or_round_trips() {
    // The inverse direction: any label decodes to an ID that encodes back to it.
    let mut rng = XorShift(0xfeed_f00d);
    const LABEL_CHARS: &[u8] = b"ax0f9-";
    for _ in 0..20_000 {
        let len = 1 + rng.below(12);
        let label: String = (0..len)
            .map(|_| char::from(LABEL_CHARS[rng.below(LABEL_CHARS.len())]))
            .collect();
        if let Ok(id) = device_id(&label) {
            assert_eq!(device_name(&id).unwrap(), label);
        }
    }
}

#[test]
fn refused_ids_say_why() {
    assert_eq!(device_name(""), Err(NameError::EmptyId));
    let long_but_fitting = "a".repeat(63);
    assert_eq!(device_name(&long_but_fitting).unwrap(), long_but_fitting);
    let too_long = "a".repeat(64);
    let error = device_name(&too_long).unwrap_err();
    assert!(matches!(
        error,
        NameError::NameTooLong {
            encoded_len: 64,
            ..
        }
    ));
    // 21 escaped bytes: 63 characters plus the leading 'x'.
    let error = device_name(&":".repeat(21)).unwrap_err();
    assert!(error.to_string().contains("64-character"), "{error}");
    assert!(device_name(&":".repeat(20)).is_ok());
}

#[test]
fn names_not_made_by_the_encoder_are_refused() {
    for name in [
        "", "-41", "xab", "x", "ab-", "a-4", "a-4G", "a-4A", "a-61", "A", "a.b", "x-61",
    ] {
        let error = device_id(name).unwrap_err();
        assert!(
            matches!(error, NameError::NotADeviceName { .. }),
            "{name:?}: {error}"
        );
    }
    // An escaped byte sequence that is not UTF-8.
    assert!(device_id("x-ff").is_err());
}

#[test]
fn driver_names_follow_the_api_server() {
    for good in ["gpu.example.com", "a", "dra-1.example.io", &"a".repeat(63)] {
        assert_eq!(check_driver_name(good), Ok(()), "{good}");
    }
    for (bad, why) in [
        ("", "empty"),
        ("GPU.example.com", "'G'"),
        ("gpu..example.com", "empty"),
        ("-gpu.example.com", "start and end"),
        ("gpu.example.com-", "start and end"),
        ("gpu_example.com", "'_'"),
        ("gpu/example", "'/'"),
    ] {
        let error = check_driver_name(bad).unwrap_err().to_string();
        assert!(error.contains(why), "{bad:?}: {error}");
    }
    let error = check_driver_name(&"a".repeat(64)).unwrap_err().to_string();
    assert!(error.contains("64 characters"), "{error}");
}
