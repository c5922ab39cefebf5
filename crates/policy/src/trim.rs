//! Handing memory the allocator keeps back to the kernel. Compiling a
//! guest frees most of what it allocated, but glibc's allocator keeps
//! those freed pages in its per-thread arenas, where they stay resident:
//! after a load or a reload the host asks for them to be returned.

/// Returns the allocator's free memory to the kernel: `malloc_trim(0)` on
/// glibc, which releases the free pages of every arena, not only the top
/// of the main one. Elsewhere (musl with mimalloc, whose image settings
/// already return freed memory at once) it does nothing. Takes about a
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
