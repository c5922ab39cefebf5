use super::*;

const SMAPS: &str = "\
55799f1a4000-55799f96d000 r--p 00000000 fc:00 4242 /bin/wdp
Size:               7972 kB
Rss:                2480 kB
Anonymous:             0 kB
55799f96d000-5579a163b000 r-xp 007c8000 fc:00 4242 /bin/wdp
Rss:               11124 kB
Anonymous:             0 kB
5579a163b000-5579a172b000 r--p 02495000 fc:00 4242 /bin/wdp
Rss:                 960 kB
Anonymous:           960 kB
5579a172b000-5579a1732000 rw-p 02584000 fc:00 4242 /bin/wdp
Anonymous:            28 kB
7fc0e8439000-7fc0e858f000 r-xp 00028000 fc:00 77 /usr/lib/libc.so.6
Anonymous:             0 kB
";

#[test]
fn only_untouched_read_only_mappings_of_the_executable_are_released() {
    let ranges = read_only_mappings_of(SMAPS, 4242);
    assert_eq!(
        ranges,
        vec![
            0x55799f1a4000..0x55799f96d000,
            0x55799f96d000..0x5579a163b000
        ],
        "relocated (anonymous) and writable segments and other files stay"
    );
}

#[test]
fn the_running_test_binary_keeps_working_after_its_code_is_released() {
    let resident_before = resident_file_kib();
    let released = release_unused_code_pages();
    assert!(
        released > 0,
        "the test binary's text is a read-only mapping"
    );
    let resident_after = resident_file_kib();
    assert!(
        resident_after < resident_before,
        "file-backed RSS {resident_before} KiB -> {resident_after} KiB"
    );
    // Code and read-only data fault back in from the same file.
    let text: String = ["still", "runs"].join(" ");
    assert_eq!(text, "still runs");
    assert!(release_unused_code_pages() > 0);
}

fn resident_file_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
    line.split_ascii_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}
