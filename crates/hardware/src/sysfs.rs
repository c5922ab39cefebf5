//! Small readers for sysfs attribute files.

use std::io::{self, Read};
use std::path::Path;

use crate::root::HostRoot;

/// Largest attribute file read during discovery (sysfs text attributes are at
/// most a page; anything bigger is not an attribute we parse).
pub(crate) const DISCOVERY_READ_CAP: u64 = 64 * 1024;

/// Reads a small text file, at most [`DISCOVERY_READ_CAP`] bytes, lossy UTF-8.
///
/// One `read` of a page is taken as the whole file when it comes back short
/// (sysfs returns an attribute in one read), so a typical attribute costs
/// three syscalls: open, read, close.
pub(crate) fn read_string(path: &Path) -> io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut page = [0u8; 4096];
    let n = loop {
        match file.read(&mut page) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    };
    if n < page.len() {
        return Ok(String::from_utf8_lossy(&page[..n]).into_owned());
    }
    let mut buf = page.to_vec();
    file.take(DISCOVERY_READ_CAP - n as u64)
        .read_to_end(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Reads a small text file and trims surrounding whitespace.
pub(crate) fn read_trimmed(path: &Path) -> io::Result<String> {
    read_string(path).map(|s| s.trim().to_string())
}

/// The value of `KEY=value` in a `uevent` file's content.
pub(crate) fn uevent_value<'a>(content: &'a str, key: &str) -> Option<&'a str> {
    content.lines().find_map(|line| {
        let (k, v) = line.split_once('=')?;
        (k == key).then_some(v.trim())
    })
}

/// Parses a hex number with or without `0x`/`0X`, case-insensitive.
pub(crate) fn parse_hex(s: &str) -> Option<u32> {
    let s = s.trim();
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

/// `numa_node` (≥ 0) of the nearest of `dir` (a host path) and its
/// ancestors that has one (for a USB device, its PCI host controller),
/// stopping below `/sys/devices`. `None` when none has one or it is negative.
pub(crate) fn ancestor_numa(root: &HostRoot, dir: &Path) -> Option<i64> {
    for ancestor in dir.ancestors() {
        if ancestor == Path::new("/sys/devices") || ancestor == Path::new("/") {
            break;
        }
        if let Ok(text) = read_trimmed(&root.resolve(&ancestor.join("numa_node"))) {
            return text.parse().ok().filter(|n: &i64| *n >= 0);
        }
    }
    None
}

/// Parses a Linux cpulist (`0-3,8,10-11`) into CPU numbers, ascending and
/// unique; `None` when it does not parse. An empty list is `Some(vec![])`.
pub fn parse_cpulist(list: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
                if hi < lo || hi - lo > 1 << 16 {
                    return None;
                }
                cpus.extend(lo..=hi);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

#[cfg(test)]
#[path = "sysfs_tests.rs"]
mod tests;
