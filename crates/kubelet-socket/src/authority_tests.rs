use super::*;

#[test]
fn integers_follow_rfc7541_examples() {
    let mut out = Vec::new();
    put_int7(&mut out, 10);
    assert_eq!(out, [10]);
    out.clear();
    put_int7(&mut out, 1337);
    // 1337 with a 7-bit prefix: 127, then 1210 = 0xba 0x09.
    assert_eq!(out, [0x7f, 0xba, 0x09]);
}

#[test]
fn a_path_authority_becomes_localhost_and_decodes() {
    let mut block = Vec::new();
    // :authority as a literal with incremental indexing, indexed name 1.
    let path = b"%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx.sock";
    block.push(0x41);
    put_string(&mut block, path);
    // :path, then the same :authority again from the dynamic table (62).
    block.push(0x04);
    put_string(&mut block, b"/pluginregistration.Registration/GetInfo");
    let mut input = PREFACE.to_vec();
    put_frame_header(&mut input, block.len(), HEADERS, END_HEADERS, 1);
    input.extend_from_slice(&block);
    let second = [0xbe];
    put_frame_header(&mut input, 1, HEADERS, END_HEADERS | END_STREAM, 3);
    input.extend_from_slice(&second);
    // Split anywhere: the result is the same.
    for cut in [1, 10, 30, input.len() - 1] {
        let mut fix = AuthorityFix::new(());
        fix.input.extend_from_slice(&input[..cut]);
        fix.process().unwrap();
        fix.input.extend_from_slice(&input[cut..]);
        fix.process().unwrap();
        let out = std::mem::take(&mut fix.output);
        assert!(out.starts_with(PREFACE));
        let mut decoder = loona_hpack::Decoder::new();
        let mut frames = &out[PREFACE.len()..];
        let mut seen = Vec::new();
        while !frames.is_empty() {
            let len = usize::from(frames[2]) | usize::from(frames[1]) << 8;
            seen.push(decoder.decode(&frames[9..9 + len]).unwrap());
            frames = &frames[9 + len..];
        }
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[0][0], (b":authority".to_vec(), b"localhost".to_vec()));
        assert_eq!(seen[1][0], (b":authority".to_vec(), b"localhost".to_vec()));
    }
}
