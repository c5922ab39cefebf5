/*
 * Small helpers shared by the C guests: UTF-8 byte strings given as
 * (pointer, length) pairs, as the canonical ABI hands them over (not
 * NUL-terminated).
 *
 * Health calls run in a fresh instance that the host throws away
 * afterwards, so `health.c` never frees its input: memory comes back with
 * the instance. Preferred-allocation calls may run in a warm instance, so
 * `packing.c` frees its inputs and scratch memory (and keeps the device
 * table of `set-devices` until the next one).
 */
#ifndef WDP_UTIL_H
#define WDP_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A borrowed byte string. */
typedef struct {
    const uint8_t *ptr;
    size_t len;
} wdp_str;

static inline wdp_str wdp_s(const uint8_t *ptr, size_t len) {
    wdp_str s = {ptr, len};
    return s;
}

/* Byte-wise comparison: the order of Rust's `str` (and of code points). */
static inline int wdp_cmp(wdp_str a, wdp_str b) {
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c != 0) return c;
    return a.len < b.len ? -1 : (a.len > b.len ? 1 : 0);
}

static inline bool wdp_eq(wdp_str a, wdp_str b) {
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static inline bool wdp_eq_c(wdp_str a, const char *b) {
    return wdp_eq(a, wdp_s((const uint8_t *)b, strlen(b)));
}

static void *wdp_xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

/* A growable byte buffer for building messages. */
typedef struct {
    uint8_t *ptr;
    size_t len, cap;
} wdp_buf;

static void wdp_buf_reserve(wdp_buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 64;
    while (cap < b->len + extra) cap *= 2;
    uint8_t *p = realloc(b->ptr, cap);
    if (!p) abort();
    b->ptr = p;
    b->cap = cap;
}

static void wdp_buf_put(wdp_buf *b, wdp_str s) {
    wdp_buf_reserve(b, s.len);
    if (s.len) memcpy(b->ptr + b->len, s.ptr, s.len);
    b->len += s.len;
}

static void wdp_buf_puts(wdp_buf *b, const char *s) {
    wdp_buf_put(b, wdp_s((const uint8_t *)s, strlen(s)));
}

/* Appends `n` in decimal (no stdio: it would pull in WASI file imports). */
static void wdp_buf_putu(wdp_buf *b, uint64_t n) {
    char digits[20];
    size_t i = sizeof digits;
    do {
        digits[--i] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    wdp_buf_put(b, wdp_s((const uint8_t *)digits + i, sizeof digits - i));
}

/* Appends `n` in lower-case hexadecimal. */
static void wdp_buf_putx(wdp_buf *b, uint32_t n) {
    char digits[8];
    size_t i = sizeof digits;
    do {
        digits[--i] = "0123456789abcdef"[n & 15];
        n >>= 4;
    } while (n);
    wdp_buf_put(b, wdp_s((const uint8_t *)digits + i, sizeof digits - i));
}

/* Decodes the UTF-8 character starting at s[i] (input is valid UTF-8:
 * the canonical ABI guarantees it); stores its length in *n. */
static uint32_t wdp_utf8_at(wdp_str s, size_t i, size_t *n) {
    const uint8_t *p = s.ptr + i;
    if (p[0] < 0x80) { *n = 1; return p[0]; }
    if ((p[0] & 0xE0) == 0xC0) { *n = 2; return ((uint32_t)(p[0] & 0x1F) << 6) | (p[1] & 0x3F); }
    if ((p[0] & 0xF0) == 0xE0) {
        *n = 3;
        return ((uint32_t)(p[0] & 0x0F) << 12) | ((uint32_t)(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
    }
    *n = 4;
    return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3F) << 12) |
           ((uint32_t)(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

/* Start of the UTF-8 character that ends just before s[end]. */
static size_t wdp_utf8_back(wdp_str s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && (s.ptr[i] & 0xC0) == 0x80) i--;
    return i;
}

/* Unicode White_Space: what Rust's `str::trim` removes. */
static bool wdp_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static wdp_str wdp_trim(wdp_str s) {
    size_t start = 0, end = s.len, n;
    while (start < end && wdp_is_space(wdp_utf8_at(s, start, &n))) start += n;
    while (end > start) {
        size_t i = wdp_utf8_back(s, end);
        if (!wdp_is_space(wdp_utf8_at(s, i, &n))) break;
        end = i;
    }
    return wdp_s(s.ptr + start, end - start);
}

#endif
