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
 * It exports both forms of the hook: `preferred-allocation` (the whole
 * request: devices and must-include IDs) and `preferred-allocation-indexed`
 * (the host sends the device table once per device-set generation with
 * `set-devices`, then only positions in it), with the same answers and
 * errors. The table, its link-locality keys and its ID order are prepared
 * once in `set-devices`; both forms then share `pack`, which works on
 * positions.
 *
 * Calls may run in a warm instance (see "Instances" in the guest guide),
 * so every call frees its input and its scratch memory: the instance's
 * memory stays flat and the host keeps it in service.
 *
 * Bindings: `wit-bindgen c wit -w preferred-allocation-indexed-guest`; see
 * `guests/polyglot/build.sh`.
 */
#include "preferred_allocation_indexed_guest.h"
#include "wdp_util.h"

typedef exports_wasm_device_plugin_policy_preferred_allocation_request_t request_t;
typedef exports_wasm_device_plugin_policy_preferred_allocation_indexed_request_t indexed_request_t;
typedef exports_wasm_device_plugin_policy_preferred_allocation_indexed_list_device_ref_t
    list_device_ref_t;
typedef wasm_device_plugin_policy_types_device_ref_t device_ref_t;
typedef preferred_allocation_indexed_guest_string_t string_t;
typedef preferred_allocation_indexed_guest_list_string_t list_string_t;
typedef preferred_allocation_indexed_guest_list_u32_t list_u32_t;

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
    size_t order; /* its rank in ID order (IDs are distinct) */
    size_t pos;   /* its position, as answered */
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
    return a->order < b->order ? -1 : a->order > b->order;
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
    size_t x = g_entries[a->start].order, y = g_entries[b->start].order;
    return x < y ? -1 : x > y;
}

/* ---- packing, on positions ------------------------------------------- */

static void take(const entry *entries, group *g, size_t *remaining, size_t *out, size_t *len) {
    size_t count = g->len < *remaining ? g->len : *remaining;
    for (size_t i = 0; i < count; i++) out[(*len)++] = entries[g->start + i].pos;
    *remaining -= count;
    g->used = true;
}

static void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size);
    if (!p) abort();
    return p;
}

/*
 * After the checks: `uniq[0..distinct)` are the distinct available
 * positions of `devs` in ID order, `chosen[p]` marks the must-include ones,
 * already answered in `out[0..*len)`; `keys[p]` is the link-locality key of
 * `devs[p]`. Appends positions to `out` until it holds `size`.
 */
static void pack(const device_ref_t *devs, const opt_key *keys, const size_t *uniq,
                 size_t distinct, const bool *chosen, size_t size, size_t *out, size_t *len) {
    size_t remaining = size - *len;
    if (remaining == 0) return;

    /* Rank NUMA nodes: nodes of must-include devices first (most such
     * devices first), then by the number of other available devices. */
    size_t total = 0;
    for (size_t u = 0; u < distinct; u++) total += devs[uniq[u]].numa_nodes.len;
    node_count *nodes = wdp_xmalloc(total * sizeof *nodes);
    size_t count = 0;
    for (size_t u = 0; u < distinct; u++) {
        const device_ref_t *d = &devs[uniq[u]];
        bool must = chosen[uniq[u]];
        for (size_t k = 0; k < d->numa_nodes.len; k++) {
            node_count c = {d->numa_nodes.ptr[k], must ? 1 : 0, must ? 0 : 1, 0};
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
        if (chosen[uniq[u]] && keys[uniq[u]].some) affinity[affinities++] = keys[uniq[u]].key;
    }
    qsort(affinity, affinities, sizeof *affinity, cmp_str);

    /* Every other device with its tier and key, in placement order. */
    entry *entries = wdp_xmalloc(distinct * sizeof *entries);
    size_t left = 0;
    for (size_t u = 0; u < distinct; u++) {
        size_t p = uniq[u];
        if (chosen[p]) continue;
        const device_ref_t *d = &devs[p];
        size_t tier = SIZE_MAX;
        for (size_t k = 0; k < d->numa_nodes.len; k++) {
            node_count probe = {d->numa_nodes.ptr[k], 0, 0, 0};
            const node_count *found = bsearch(&probe, nodes, kinds, sizeof *nodes, cmp_node_id);
            if (found && found->rank < tier) tier = found->rank;
        }
        entry e = {tier, keys[p], u, p};
        entries[left++] = e;
    }
    qsort(entries, left, sizeof *entries, cmp_entry);
    g_entries = entries;

    group *groups = wdp_xmalloc(left * sizeof *groups);
    for (size_t start = 0; start < left && remaining > 0;) {
        /* One tier: its groups, keyed ones by key, then lone devices. */
        size_t end = start, count_groups = 0;
        while (end < left && entries[end].tier == entries[start].tier) {
            size_t n = 1;
            if (entries[end].key.some) {
                while (end + n < left && entries[end + n].tier == entries[end].tier &&
                       entries[end + n].key.some && wdp_eq(entries[end + n].key.key, entries[end].key.key))
                    n++;
            }
            group g = {end, n, entries[end].key, false};
            groups[count_groups++] = g;
            end += n;
        }

        /* Groups linked to what is already chosen come first, by key. */
        for (size_t i = 0; i < count_groups && remaining > 0; i++) {
            if (groups[i].key.some &&
                bsearch(&groups[i].key.key, affinity, affinities, sizeof *affinity, cmp_str))
                take(entries, &groups[i], &remaining, out, len);
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
            take(entries, &groups[pick], &remaining, out, len);
        }
        start = end;
    }
    free(groups);
    free(entries);
    free(affinity);
    free(nodes);
}

/* The errors, in the contract's order (see the guest guide): too few
 * devices, a must-include device that is not available, too many
 * must-include devices. */
static void too_few(wdp_buf *msg, size_t distinct, size_t size) {
    wdp_buf_puts(msg, "only ");
    wdp_buf_putu(msg, distinct);
    wdp_buf_puts(msg, " devices available for an allocation of ");
    wdp_buf_putu(msg, size);
}

static void not_available(wdp_buf *msg, wdp_str id) {
    wdp_buf_puts(msg, "must-include device ");
    put_debug(msg, id);
    wdp_buf_puts(msg, " is not available");
}

static void too_many(wdp_buf *msg, size_t must, size_t size) {
    wdp_buf_putu(msg, must);
    wdp_buf_puts(msg, " must-include devices do not fit an allocation of ");
    wdp_buf_putu(msg, size);
}

/* ---- preferred-allocation: the whole request ------------------------- */

bool exports_wasm_device_plugin_policy_preferred_allocation_choose(request_t *request,
                                                                   list_string_t *ret,
                                                                   string_t *err) {
    const device_ref_t *devs = request->available.ptr;
    size_t n = request->available.len, size = request->size;
    size_t must_len = request->must_include.len;
    wdp_buf msg = {0};
    bool ok = false;
    bool *chosen = NULL;
    size_t *out = NULL, len = 0;
    opt_key *keys = NULL;

    /* Distinct available devices, sorted by ID, first occurrence wins. */
    size_t *uniq = wdp_xmalloc(n * sizeof *uniq);
    for (size_t i = 0; i < n; i++) uniq[i] = i;
    g_devices = devs;
    qsort(uniq, n, sizeof *uniq, cmp_index_by_id);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        if (distinct && wdp_eq(S(&devs[uniq[i]].id), S(&devs[uniq[distinct - 1]].id))) continue;
        uniq[distinct++] = uniq[i];
    }
    if (distinct < size) {
        too_few(&msg, distinct, size);
        goto done;
    }

    chosen = xcalloc(n, sizeof *chosen);
    out = wdp_xmalloc((size > must_len ? size : must_len) * sizeof *out);
    for (size_t m = 0; m < must_len; m++) {
        wdp_str want = S(&request->must_include.ptr[m]);
        size_t lo = 0, hi = distinct;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (wdp_cmp(S(&devs[uniq[mid]].id), want) < 0) lo = mid + 1;
            else hi = mid;
        }
        if (lo == distinct || !wdp_eq(S(&devs[uniq[lo]].id), want)) {
            not_available(&msg, want);
            goto done;
        }
        if (!chosen[uniq[lo]]) {
            chosen[uniq[lo]] = true;
            out[len++] = uniq[lo];
        }
    }
    if (len > size) {
        too_many(&msg, len, size);
        goto done;
    }

    keys = wdp_xmalloc(n * sizeof *keys);
    for (size_t u = 0; u < distinct; u++) keys[uniq[u]] = locality_key(&devs[uniq[u]]);
    pack(devs, keys, uniq, distinct, chosen, size, out, &len);

    /* Copies of the IDs: the request is freed below, the answer after the
     * host read it (by the generated post-return glue). */
    ret->len = len;
    ret->ptr = len ? wdp_xmalloc(len * sizeof *ret->ptr) : NULL;
    for (size_t i = 0; i < len; i++) {
        const string_t *id = &devs[out[i]].id;
        ret->ptr[i].len = id->len;
        ret->ptr[i].ptr = id->len ? wdp_xmalloc(id->len) : NULL;
        if (id->len) memcpy(ret->ptr[i].ptr, id->ptr, id->len);
    }
    ok = true;

done:
    free(keys);
    free(out);
    free(chosen);
    free(uniq);
    exports_wasm_device_plugin_policy_preferred_allocation_request_free(request);
    return ok ? true : fail(err, &msg);
}

/* ---- preferred-allocation-indexed: positions in a device table ------- */

/* The device table of the latest `set-devices` (owned), and what only
 * depends on it. */
static struct {
    bool loaded;
    list_device_ref_t devices;
    opt_key *keys;     /* per position: its link-locality key */
    size_t *canonical; /* per position: the first position with its ID */
    size_t *by_id;     /* the canonical positions, in ID order */
    size_t ids;        /* how many */
} table;

void exports_wasm_device_plugin_policy_preferred_allocation_indexed_set_devices(
    uint64_t generation, list_device_ref_t *devices) {
    (void)generation;
    if (table.loaded) {
        free(table.keys);
        free(table.canonical);
        free(table.by_id);
        exports_wasm_device_plugin_policy_preferred_allocation_indexed_list_device_ref_free(&table.devices);
    }
    const device_ref_t *devs = devices->ptr;
    size_t n = devices->len;
    table.devices = *devices;
    table.keys = wdp_xmalloc(n * sizeof *table.keys);
    table.canonical = wdp_xmalloc(n * sizeof *table.canonical);
    table.by_id = wdp_xmalloc(n * sizeof *table.by_id);
    for (size_t p = 0; p < n; p++) {
        table.by_id[p] = p;
        table.keys[p] = locality_key(&devs[p]);
    }
    /* By ID, then position: the first position of an ID is canonical. */
    g_devices = devs;
    qsort(table.by_id, n, sizeof *table.by_id, cmp_index_by_id);
    size_t ids = 0;
    for (size_t i = 0; i < n; i++) {
        size_t p = table.by_id[i];
        if (ids && wdp_eq(S(&devs[p].id), S(&devs[table.by_id[ids - 1]].id))) {
            table.canonical[p] = table.by_id[ids - 1];
        } else {
            table.canonical[p] = p;
            table.by_id[ids++] = p;
        }
    }
    table.ids = ids;
    table.loaded = true;
}

/* A position of the request, or the error that it is outside the table. */
static bool in_table(uint32_t position, size_t n, wdp_buf *msg) {
    if (position < n) return true;
    wdp_buf_puts(msg, "position ");
    wdp_buf_putu(msg, position);
    wdp_buf_puts(msg, " is outside the device table of ");
    wdp_buf_putu(msg, n);
    return false;
}

bool exports_wasm_device_plugin_policy_preferred_allocation_indexed_choose(indexed_request_t *request,
                                                                           list_u32_t *ret,
                                                                           string_t *err) {
    size_t size = request->size, must_len = request->must_include.len;
    wdp_buf msg = {0};
    bool ok = false;
    bool *available = NULL, *chosen = NULL;
    size_t *uniq = NULL, *out = NULL, len = 0;
    if (!table.loaded) {
        wdp_buf_puts(&msg, "no device table: the host called choose before set-devices");
        goto done;
    }
    const device_ref_t *devs = table.devices.ptr;
    size_t n = table.devices.len;

    /* The same checks, in the same order, as the whole request. */
    available = xcalloc(n, sizeof *available);
    size_t distinct = 0;
    for (size_t i = 0; i < request->available.len; i++) {
        uint32_t p = request->available.ptr[i];
        if (!in_table(p, n, &msg)) goto done;
        size_t c = table.canonical[p];
        if (!available[c]) {
            available[c] = true;
            distinct++;
        }
    }
    if (distinct < size) {
        too_few(&msg, distinct, size);
        goto done;
    }
    chosen = xcalloc(n, sizeof *chosen);
    out = wdp_xmalloc((size > must_len ? size : must_len) * sizeof *out);
    for (size_t m = 0; m < must_len; m++) {
        uint32_t p = request->must_include.ptr[m];
        if (!in_table(p, n, &msg)) goto done;
        size_t c = table.canonical[p];
        if (!available[c]) {
            not_available(&msg, S(&devs[p].id));
            goto done;
        }
        if (!chosen[c]) {
            chosen[c] = true;
            out[len++] = c;
        }
    }
    if (len > size) {
        too_many(&msg, len, size);
        goto done;
    }

    /* The available positions in ID order, from the table's order. */
    uniq = wdp_xmalloc(distinct * sizeof *uniq);
    size_t u = 0;
    for (size_t i = 0; i < table.ids; i++) {
        if (available[table.by_id[i]]) uniq[u++] = table.by_id[i];
    }
    pack(devs, table.keys, uniq, distinct, chosen, size, out, &len);

    ret->len = len;
    ret->ptr = len ? wdp_xmalloc(len * sizeof *ret->ptr) : NULL;
    for (size_t i = 0; i < len; i++) ret->ptr[i] = (uint32_t)out[i];
    ok = true;

done:
    free(uniq);
    free(out);
    free(chosen);
    free(available);
    exports_wasm_device_plugin_policy_preferred_allocation_indexed_request_free(request);
    return ok ? true : fail(err, &msg);
}
