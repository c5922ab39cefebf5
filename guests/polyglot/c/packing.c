/*
 * `c-packing`: the `numa-packing` preferred-allocation guest, in C.
 *
 * Same behaviour as the Rust guest (`guests/numa-packing`, logic in
 * `guests/packing-core`):
 *   1. every must-include ID (once);
 *   2. then devices on the NUMA node(s) of the must-include devices, then
 *      on the NUMA nodes with the most available devices (devices without
 *      NUMA information last);
 *   3. within a NUMA tier, link groups linked to what was already chosen,
 *      then whole link groups by best fit (smallest group covering what is
 *      missing; when none does, the biggest group first). A device's link
 *      group is its `link.group` attribute, else the grandparent of `pci.path`;
 *   4. ties broken by ID (byte order).
 *
 * Bindings: `wit-bindgen c wit -w preferred-allocation-guest`; see
 * `guests/polyglot/build.sh`.
 */
#include "preferred_allocation_guest.h"
#include "wdp_util.h"

typedef exports_wasm_device_plugin_policy_preferred_allocation_request_t request_t;
typedef wasm_device_plugin_policy_types_device_ref_t device_ref_t;
typedef preferred_allocation_guest_string_t string_t;
typedef preferred_allocation_guest_list_string_t list_string_t;

static wdp_str S(const string_t *s) { return wdp_s(s->ptr, s->len); }

/* ---- the device's link-locality key ---------------------------------- */

typedef struct {
    bool some;
    wdp_str key;
} opt_key;

/* First value of attribute `name`; none when absent or empty. */
static opt_key lookup(const wasm_device_plugin_policy_types_attributes_t *attrs, const char *name) {
    opt_key r = {false, {0, 0}};
    for (size_t i = 0; i < attrs->len; i++) {
        if (wdp_eq_c(S(&attrs->ptr[i].f0), name)) {
            r.key = S(&attrs->ptr[i].f1);
            r.some = r.key.len > 0;
            return r;
        }
    }
    return r;
}

/* The parent directory of a path, or none. */
static opt_key parent_dir(opt_key path) {
    if (!path.some) return path;
    size_t end = path.key.len;
    while (end > 0 && path.key.ptr[end - 1] == '/') end--;
    size_t slash = end;
    while (slash > 0 && path.key.ptr[slash - 1] != '/') slash--;
    /* No slash (slash == 0) or only a leading one (parent empty): none. */
    opt_key r = {slash > 1, wdp_s(path.key.ptr, slash > 1 ? slash - 1 : 0)};
    return r;
}

/* `link.group`, else the grandparent of `pci.path` (the PCIe switch). */
static opt_key locality_key(const device_ref_t *d) {
    opt_key group = lookup(&d->attributes, "link.group");
    if (group.some) return group;
    return parent_dir(parent_dir(lookup(&d->attributes, "pci.path")));
}

static int cmp_opt(opt_key a, opt_key b) {
    if (a.some != b.some) return a.some ? 1 : -1; /* None < Some */
    return a.some ? wdp_cmp(a.key, b.key) : 0;
}

/* ---- errors ---------------------------------------------------------- */

static bool fail(string_t *err, wdp_buf *b) {
    err->ptr = b->ptr;
    err->len = b->len;
    return false;
}

/* Rust's `{:?}` of a string: quoted, with the usual escapes. */
static void put_debug(wdp_buf *b, wdp_str s) {
    wdp_buf_puts(b, "\"");
    for (size_t i = 0; i < s.len;) {
        size_t n;
        uint32_t c = wdp_utf8_at(s, i, &n);
        if (c == '"') wdp_buf_puts(b, "\\\"");
        else if (c == '\\') wdp_buf_puts(b, "\\\\");
        else if (c == '\n') wdp_buf_puts(b, "\\n");
        else if (c == '\r') wdp_buf_puts(b, "\\r");
        else if (c == '\t') wdp_buf_puts(b, "\\t");
        else if (c == 0) wdp_buf_puts(b, "\\0");
        else if (c < 0x20 || (c >= 0x7F && c <= 0x9F)) {
            wdp_buf_puts(b, "\\u{");
            wdp_buf_putx(b, c);
            wdp_buf_puts(b, "}");
        }
        else wdp_buf_put(b, wdp_s(s.ptr + i, n));
        i += n;
    }
    wdp_buf_puts(b, "\"");
}

/* ---- sorting helpers (qsort has no context argument) ----------------- */

static const device_ref_t *g_devices;

/* Available indices by ID, then by position: the first occurrence of an
 * ID sorts first among equals. */
static int cmp_index_by_id(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    int c = wdp_cmp(S(&g_devices[a].id), S(&g_devices[b].id));
    return c ? c : (a < b ? -1 : a > b);
}

typedef struct {
    int64_t node;
    size_t must, other, rank;
} node_count;

static int cmp_node_id(const void *pa, const void *pb) {
    int64_t a = ((const node_count *)pa)->node, b = ((const node_count *)pb)->node;
    return a < b ? -1 : a > b;
}

/* Must-include devices first, then other devices, both most first. */
static int cmp_node_rank(const void *pa, const void *pb) {
    const node_count *a = pa, *b = pb;
    if (a->must != b->must) return a->must > b->must ? -1 : 1;
    if (a->other != b->other) return a->other > b->other ? -1 : 1;
    return a->node < b->node ? -1 : a->node > b->node;
}

static int cmp_i64(const void *pa, const void *pb) {
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return a < b ? -1 : a > b;
}

static int cmp_str(const void *pa, const void *pb) {
    return wdp_cmp(*(const wdp_str *)pa, *(const wdp_str *)pb);
}

/* A device still to place. */
typedef struct {
    size_t tier;
    opt_key key;
    wdp_str id;
    string_t *out; /* the ID as returned */
} entry;

/* Tier, then keyed groups (by key) before lone devices, then ID. */
static int cmp_entry(const void *pa, const void *pb) {
    const entry *a = pa, *b = pb;
    if (a->tier != b->tier) return a->tier < b->tier ? -1 : 1;
    if (a->key.some != b->key.some) return a->key.some ? -1 : 1;
    if (a->key.some) {
        int c = wdp_cmp(a->key.key, b->key.key);
        if (c) return c;
    }
    return wdp_cmp(a->id, b->id);
}

typedef struct {
    size_t start, len;
    opt_key key;
    bool used;
} group;

static const entry *g_entries;

/* Best-fit order: size, key (none first), first ID. */
static int cmp_group(const void *pa, const void *pb) {
    const group *a = pa, *b = pb;
    if (a->len != b->len) return a->len < b->len ? -1 : 1;
    int c = cmp_opt(a->key, b->key);
    if (c) return c;
    return wdp_cmp(g_entries[a->start].id, g_entries[b->start].id);
}

/* ---- the hook -------------------------------------------------------- */

static void take(const entry *entries, group *g, size_t *remaining, list_string_t *out) {
    size_t count = g->len < *remaining ? g->len : *remaining;
    for (size_t i = 0; i < count; i++) out->ptr[out->len++] = *entries[g->start + i].out;
    *remaining -= count;
    g->used = true;
}

bool exports_wasm_device_plugin_policy_preferred_allocation_choose(request_t *request,
                                                                   list_string_t *ret,
                                                                   string_t *err) {
    const device_ref_t *devices = request->available.ptr;
    size_t n = request->available.len, size = request->size;
    wdp_buf msg = {0};

    /* Distinct available devices, sorted by ID, first occurrence wins. */
    size_t *uniq = wdp_xmalloc(n * sizeof *uniq);
    for (size_t i = 0; i < n; i++) uniq[i] = i;
    g_devices = devices;
    qsort(uniq, n, sizeof *uniq, cmp_index_by_id);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (distinct && wdp_eq(S(&devices[uniq[i]].id), S(&devices[uniq[distinct - 1]].id))) continue;
        uniq[distinct++] = uniq[i];
    }
    if (distinct < size) {
        wdp_buf_puts(&msg, "only ");
        wdp_buf_putu(&msg, distinct);
        wdp_buf_puts(&msg, " devices available for an allocation of ");
        wdp_buf_putu(&msg, size);
        return fail(err, &msg);
    }

    size_t must_len = request->must_include.len;
    ret->ptr = wdp_xmalloc((size > must_len ? size : must_len) * sizeof *ret->ptr);
    ret->len = 0;
    bool *chosen = calloc(distinct ? distinct : 1, sizeof *chosen);
    if (!chosen) abort();
    for (size_t m = 0; m < must_len; m++) {
        wdp_str want = S(&request->must_include.ptr[m]);
        size_t lo = 0, hi = distinct;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (wdp_cmp(S(&devices[uniq[mid]].id), want) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo == distinct || !wdp_eq(S(&devices[uniq[lo]].id), want)) {
            wdp_buf_puts(&msg, "must-include device ");
            put_debug(&msg, want);
            wdp_buf_puts(&msg, " is not available");
            return fail(err, &msg);
        }
        if (!chosen[lo]) {
            chosen[lo] = true;
            ret->ptr[ret->len++] = devices[uniq[lo]].id;
        }
    }
    if (ret->len > size) {
        wdp_buf_putu(&msg, ret->len);
        wdp_buf_puts(&msg, " must-include devices do not fit an allocation of ");
        wdp_buf_putu(&msg, size);
        return fail(err, &msg);
    }
    size_t remaining = size - ret->len;
    if (remaining == 0) return true;

    /* Rank NUMA nodes: nodes of must-include devices first (most such
     * devices first), then by the number of other available devices. */
    size_t total = 0;
    for (size_t u = 0; u < distinct; u++) total += devices[uniq[u]].numa_nodes.len;
    node_count *nodes = wdp_xmalloc(total * sizeof *nodes);
    size_t count = 0;
    for (size_t u = 0; u < distinct; u++) {
        const device_ref_t *d = &devices[uniq[u]];
        for (size_t k = 0; k < d->numa_nodes.len; k++) {
            node_count c = {d->numa_nodes.ptr[k], chosen[u] ? 1 : 0, chosen[u] ? 0 : 1, 0};
            nodes[count++] = c;
        }
    }
    qsort(nodes, count, sizeof *nodes, cmp_node_id);
    size_t kinds = 0;
    for (size_t i = 0; i < count; i++) {
        if (kinds && nodes[kinds - 1].node == nodes[i].node) {
            nodes[kinds - 1].must += nodes[i].must;
            nodes[kinds - 1].other += nodes[i].other;
        } else {
            nodes[kinds++] = nodes[i];
        }
    }
    qsort(nodes, kinds, sizeof *nodes, cmp_node_rank);
    for (size_t i = 0; i < kinds; i++) nodes[i].rank = i;
    qsort(nodes, kinds, sizeof *nodes, cmp_node_id); /* back to lookup order */

    /* Link groups of the must-include devices. */
    wdp_str *affinity = wdp_xmalloc(distinct * sizeof *affinity);
    size_t affinities = 0;
    for (size_t u = 0; u < distinct; u++) {
        if (!chosen[u]) continue;
        opt_key key = locality_key(&devices[uniq[u]]);
        if (key.some) affinity[affinities++] = key.key;
    }
    qsort(affinity, affinities, sizeof *affinity, cmp_str);

    /* Every other device with its tier and key, in placement order. */
    entry *entries = wdp_xmalloc(distinct * sizeof *entries);
    size_t left = 0;
    for (size_t u = 0; u < distinct; u++) {
        if (chosen[u]) continue;
        const device_ref_t *d = &devices[uniq[u]];
        size_t tier = SIZE_MAX;
        for (size_t k = 0; k < d->numa_nodes.len; k++) {
            node_count probe = {d->numa_nodes.ptr[k], 0, 0, 0};
            const node_count *found = bsearch(&probe, nodes, kinds, sizeof *nodes, cmp_node_id);
            if (found && found->rank < tier) tier = found->rank;
        }
        entry e = {tier, locality_key(d), S(&d->id), (string_t *)&d->id};
        entries[left++] = e;
    }
    qsort(entries, left, sizeof *entries, cmp_entry);
    g_entries = entries;

    group *groups = wdp_xmalloc(left * sizeof *groups);
    for (size_t start = 0; start < left && remaining > 0;) {
        /* One tier: its groups, keyed ones by key, then lone devices. */
        size_t end = start, count_groups = 0;
        while (end < left && entries[end].tier == entries[start].tier) {
            size_t len = 1;
            if (entries[end].key.some) {
                while (end + len < left && entries[end + len].tier == entries[end].tier &&
                       entries[end + len].key.some && wdp_eq(entries[end + len].key.key, entries[end].key.key))
                    len++;
            }
            group g = {end, len, entries[end].key, false};
            groups[count_groups++] = g;
            end += len;
        }

        /* Groups linked to what is already chosen come first, by key. */
        for (size_t i = 0; i < count_groups && remaining > 0; i++) {
            if (groups[i].key.some &&
                bsearch(&groups[i].key.key, affinity, affinities, sizeof *affinity, cmp_str))
                take(entries, &groups[i], &remaining, ret);
        }

        /* Then best fit: by (size, key, first ID). */
        qsort(groups, count_groups, sizeof *groups, cmp_group);
        while (remaining > 0) {
            size_t pick = SIZE_MAX, last = SIZE_MAX;
            for (size_t i = 0; i < count_groups; i++) {
                if (groups[i].used) continue;
                last = i;
                if (pick == SIZE_MAX && groups[i].len >= remaining) pick = i;
            }
            if (last == SIZE_MAX) break;
            if (pick == SIZE_MAX) {
                /* None covers the rest: the first of the biggest groups. */
                for (size_t i = 0; i < count_groups; i++) {
                    if (!groups[i].used && groups[i].len >= groups[last].len) {
                        pick = i;
                        break;
                    }
                }
            }
            take(entries, &groups[pick], &remaining, ret);
        }
        start = end;
    }
    return true;
}
