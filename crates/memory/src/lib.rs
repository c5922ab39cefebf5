//! Handing memory the process no longer uses back to the kernel: the
//! host calls it after start-up, after a reload and after compiling guests.
//! It knows nothing of what the memory held.
//!
//! Two kinds: heap pages the allocator keeps after a compile freed them
//! ([`release_free_memory`]), and pages of the host's own executable that
//! only start-up or a reload touched ([`release_unused_code_pages`]).
//! Compiling a guest frees most of what it allocated, but glibc's allocator
//! keeps those freed pages in its per-thread arenas, where they stay
//! resident; and every code page start-up ran (config parsing, guest
//! loading, server set-up, 64 KiB at a time by the kernel's fault-around)
//! stays mapped although serving never runs it again.

// The size rule for functions (clippy.toml): production code only.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::fs;
use std::os::unix::fs::MetadataExt;

/// Returns the allocator's free memory to the kernel: `malloc_trim(0)` on
/// glibc, which releases the free pages of every arena, not only the top
/// of the main one. Elsewhere (the image's musl build, whose allocator
/// returns freed memory by itself) it does nothing. Takes about a
/// millisecond; call it after work that freed a lot (a compile).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    malloc_trim();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn malloc_trim() {
    // SAFETY: malloc_trim only walks the allocator's own free lists under
    // its locks; it takes no pointer and is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Unmaps the executable's read-only pages from the process, so that only
/// the code serving actually runs comes back (on its next use, from the
/// page cache, which keeps them: no disk read, a minor fault).
///
/// Only mappings of the running executable that are private, not
/// writable and hold no page of their own (`Anonymous: 0 kB` in
/// `/proc/self/smaps`: text and read-only data, never the relocated or
/// writable segments) are touched, so no content can change. Returns the
/// bytes of the mappings released; 0 where `/proc` cannot say (another OS,
/// no procfs), which is harmless. Call it after start-up and after a
/// reload, not on a hot path: every page the process still uses faults
/// back in.
pub fn release_unused_code_pages() -> u64 {
    let Some(exe_inode) = fs::metadata("/proc/self/exe").ok().map(|m| m.ino()) else {
        return 0;
    };
    let Ok(smaps) = fs::read_to_string("/proc/self/smaps") else {
        return 0;
    };
    read_only_mappings_of(&smaps, exe_inode)
        .into_iter()
        .filter(|range| unmap_pages(range.start, range.end - range.start))
        .map(|range| range.end - range.start)
        .sum()
}

/// Address ranges in `smaps` text that map file `inode` private and
/// read-only with no anonymous (copied-on-write) page.
fn read_only_mappings_of(smaps: &str, inode: u64) -> Vec<std::ops::Range<u64>> {
    let mut found = Vec::new();
    let mut current: Option<std::ops::Range<u64>> = None;
    for line in smaps.lines() {
        if let Some(range) = mapping_header(line, inode) {
            current = range;
            continue;
        }
        if let Some(kib) = line.strip_prefix("Anonymous:")
            && let Some(range) = current.take()
            && kib.trim().trim_end_matches("kB").trim() == "0"
        {
            found.push(range);
        }
    }
    found
}

/// For a mapping's header line: `Some(Some(range))` when it maps `inode`
/// private and read-only, `Some(None)` for any other mapping, `None` for a
/// field line.
#[allow(clippy::option_option)]
fn mapping_header(line: &str, inode: u64) -> Option<Option<std::ops::Range<u64>>> {
    let mut fields = line.split_ascii_whitespace();
    let range = fields.next()?;
    let (start, end) = range.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = fields.next()?;
    let _offset = fields.next()?;
    let _device = fields.next()?;
    let mapped_inode: u64 = fields.next()?.parse().ok()?;
    let read_only_private = perms.len() == 4 && !perms.contains('w') && perms.ends_with('p');
    Some((read_only_private && mapped_inode == inode && end > start).then_some(start..end))
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn unmap_pages(start: u64, len: u64) -> bool {
    // SAFETY: the range is a whole, page-aligned mapping of the running
    // executable that is private, not writable and has no anonymous page
    // (checked by the caller from /proc/self/smaps): MADV_DONTNEED drops
    // its page-table entries only, and the next access maps the same file
    // content again. No Rust object lives in it.
    unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            len as usize,
            libc::MADV_DONTNEED,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn unmap_pages(_start: u64, _len: u64) -> bool {
    false
}

#[cfg(test)]
mod tests;
