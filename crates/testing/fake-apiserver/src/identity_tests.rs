use super::*;

#[test]
fn uids_are_distinct_v4_uuids() {
    let a = new_uid();
    let b = new_uid();
    assert_ne!(a, b);
    assert_eq!(a.len(), 36);
    assert_eq!(&a[14..15], "4");
    assert!(matches!(&a[19..20], "8" | "9" | "a" | "b"), "{a}");
}

#[test]
fn suffixes_use_the_alphabet() {
    let s = generated_name_suffix();
    assert_eq!(s.len(), 5);
    assert!(s.bytes().all(|c| SUFFIX_ALPHABET.contains(&c)));
}
